#!/bin/sh
# setup-debian.sh - installs every Debian 12 package sluice's build, tests,
# examples and benchmarks use. Run as root. Quiet, and a fast no-op when
# everything is already installed: "apt-get update" runs only when a
# package is missing.
set -eu

PACKAGES="
    build-essential autoconf automake libtool pkg-config
    libev-dev python3-dev check node-llhttp
    systemd clang-format curl procps util-linux
    python3-pytest
    python3-flask python3-django python3-starlette python3-fastapi
    python3-djangorestframework
    python3-uvicorn python3-uvloop python3-httptools python3-hypercorn
    gunicorn uwsgi uwsgi-plugin-python3 python3-waitress
    wrk python3-matplotlib
    zlib1g-dev clang-14 libfuzzer-14-dev
    python3-websockets python3-wsproto node-ws nodejs
    haproxy prometheus nginx
    debhelper dpkg-dev fakeroot lintian
    groff-base
    nftables iproute2
    python3-yaml
    libssl-dev openssl python3-trustme python3-httpx testssl.sh
    libnghttp2-dev nghttp2-client python3-h2
    media-types python3-whitenoise
"

# shellcheck disable=SC2086 # one word per package
installed=$(dpkg-query -W -f '${Package} ${db:Status-Abbrev}\n' $PACKAGES \
    2>/dev/null || true)
missing=
for p in $PACKAGES; do
    case "$installed" in
    "$p ii"* | *"
$p ii"*) ;;
    *) missing="$missing $p" ;;
    esac
done
[ -n "$missing" ] || exit 0

if [ "$(id -u)" -ne 0 ]; then
    echo "setup-debian.sh: missing packages:$missing" >&2
    echo "setup-debian.sh: run me as root to install them" >&2
    exit 1
fi
echo "setup-debian.sh: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086 # one word per package
apt-get install -y -qq --no-install-recommends $missing >/dev/null
