"""Flask JSON endpoint of the frameworks suite: GET / answers
{"message": "Hello, World!"} through jsonify (TechEmpower's JSON test)."""

from flask import Flask, jsonify

app = Flask(__name__)


@app.route("/")
def index():
    return jsonify(message="Hello, World!")
