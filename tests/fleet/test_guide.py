"""The deployment guide's files (contrib/deploy) are what they claim: the
HAProxy and nginx configurations pass the tools' own checks; the HAProxy
one has every directive the fleet test depends on; the stop timeouts of
Kubernetes and systemd cover --shutdown-delay + --graceful-timeout + 1 s;
the sluice settings they show are accepted by sluice --check-config."""

import os
import re
import shutil
import subprocess

import pytest
import yaml

import helpers
from fleet import HAPROXY, HAPROXY_CFG

DEPLOY = helpers.REPO / "contrib" / "deploy"
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
# directives whose absence would make the fleet test's "zero failed" claim
# untrue of the guide's configuration
FLEET_DIRECTIVES = ("mode http", "timeout tunnel", "retries",
                    "option redispatch", "retry-on", "option httpchk",
                    "http-check expect status 200", "send-proxy-v2",
                    "fall 1", "rise 2")


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=30,
                          **kw)


def test_haproxy_cfg_is_valid_and_has_the_fleet_directives(tmp_path):
    if not os.access(HAPROXY, os.X_OK):
        pytest.skip("haproxy is not installed")
    text = (DEPLOY / "haproxy.cfg").read_text()
    cfg = tmp_path / "haproxy.cfg"
    cfg.write_text(text.replace("/run/haproxy/admin.sock",
                                str(tmp_path / "admin.sock")))
    r = run([HAPROXY, "-c", "-f", str(cfg)])
    assert r.returncode == 0, r.stdout
    for d in FLEET_DIRECTIVES:
        assert d in text, "contrib/deploy/haproxy.cfg lacks %r" % d
        assert d in HAPROXY_CFG, "the fleet test's haproxy lacks %r" % d


def test_nginx_conf_is_valid(tmp_path):
    if not os.access(NGINX, os.X_OK):
        pytest.skip("nginx is not installed")
    main = tmp_path / "nginx.conf"
    main.write_text("pid %s/nginx.pid;\nerror_log stderr;\n"
                    "events {}\nhttp {\n    include %s;\n}\n"
                    % (tmp_path, DEPLOY / "nginx.conf"))
    r = run([NGINX, "-t", "-c", str(main), "-p", str(tmp_path)])
    assert r.returncode == 0, r.stdout


def sluice_args(args):
    """--shutdown-delay and --graceful-timeout among ARGS (--x=N form)."""
    opts = dict(a[2:].split("=", 1) for a in args if a.startswith("--")
                and "=" in a)
    return float(opts["shutdown-delay"]), float(opts["graceful-timeout"])


def test_kubernetes_grace_covers_the_drain():
    docs = list(yaml.safe_load_all((DEPLOY / "kubernetes.yaml").read_text()))
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    spec = deployment["spec"]["template"]["spec"]
    container = spec["containers"][0]
    delay, grace = sluice_args(container["command"])
    assert spec["terminationGracePeriodSeconds"] >= delay + grace + 1
    probe = container["readinessProbe"]["httpGet"]
    assert "--health-path=" + probe["path"] in container["command"]
    assert "lifecycle" not in container, "no preStop hook is needed"
    live = container.get("livenessProbe", {})
    assert live.get("httpGet", {}).get("path") != probe["path"], \
        "a liveness probe on the health path kills the pod mid-drain"


def test_systemd_units_fit_their_settings(tmp_path):
    unit = (DEPLOY / "systemd" / "sluice-fleet@.service").read_text()
    # the example configuration file, from the unit's comment
    conf = "\n".join(line[len("#     "):] for line in unit.splitlines()
                     if re.match(r"#     [a-z_]+ = ", line))
    settings = dict(line.split(" = ", 1) for line in conf.splitlines())
    delay = float(settings["shutdown_delay"])
    grace = float(settings["graceful_timeout"])
    stop = float(re.search(r"^TimeoutStopSec=(\d+)", unit, re.M).group(1))
    assert stop >= delay + grace + 1, (stop, delay, grace)
    (tmp_path / "fleet.conf").write_text(conf.replace(
        settings["chdir"], str(tmp_path)) + "\n")
    r = run([helpers.sluice_bin(), "-c", str(tmp_path / "fleet.conf"),
             "--bind", "127.0.0.1:8001", "--check-config", "app:app"])
    assert r.returncode == 0, r.stdout
    assert "PartOf=sluice-fleet.target" in unit
    target = (DEPLOY / "systemd" / "sluice-fleet.target").read_text()
    assert "[Unit]" in target
