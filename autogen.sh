#!/bin/sh
# autogen.sh - generates ./configure and Makefile.in from a git checkout.
# Release tarballs ship them; run ./configure there directly.
set -e
cd "$(dirname "$0")"
autoreconf -fi
