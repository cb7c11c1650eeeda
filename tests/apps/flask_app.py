"""A small but real Flask application for the end-to-end tests.

It uses the parts of Flask that lean on the WSGI server: form parsing from
wsgi.input, multipart uploads, redirects built from the environ (Host,
SCRIPT_NAME), JSON in and out, and a streamed response whose generator
still needs the request context.
"""

import hashlib

from flask import (Flask, Response, jsonify, redirect, request,
                   stream_with_context, url_for)

app = Flask(__name__)


@app.route("/")
def index():
    return "hello from flask\n"


@app.route("/form", methods=["POST"])
def form():
    return jsonify(fields={k: request.form.getlist(k) for k in request.form},
                   content_type=request.mimetype)


@app.route("/upload", methods=["POST"])
def upload():
    files = {}
    for name in request.files:
        for f in request.files.getlist(name):
            data = f.read()
            files.setdefault(name, []).append({
                "filename": f.filename,
                "size": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
                "mimetype": f.mimetype,
            })
    return jsonify(files=files, fields=request.form.to_dict())


@app.route("/redirect")
def go_elsewhere():
    return redirect(url_for("target", note=request.args.get("note", "")))


@app.route("/target")
def target():
    return "target reached note=%s\n" % request.args.get("note", "")


@app.route("/json", methods=["GET", "POST"])
def json_route():
    if request.method == "GET":
        return jsonify(ok=True, items=[1, 2, 3], text="caf\u00e9")
    data = request.get_json()
    return jsonify(received=data, doubled=[x * 2 for x in data["numbers"]])


@app.route("/stream")
def stream():
    count = int(request.args.get("n", "5"))

    @stream_with_context
    def generate():
        # request is only reachable here thanks to stream_with_context.
        prefix = request.args.get("prefix", "line")
        for i in range(count):
            yield "%s %d\n" % (prefix, i)

    return Response(generate(), mimetype="text/plain")


@app.route("/fail")
def fail():
    raise RuntimeError("flask view failed on purpose")
