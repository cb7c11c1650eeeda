#!/bin/sh
# build-deb.sh - builds sluice's Debian package from this source tree in one
# command ("make deb" runs it; so can a fresh clone, unconfigured):
#
#     contrib/build-deb.sh [OUTDIR]          OUTDIR defaults to _deb/
#
# The build runs in a temporary copy, so the source tree (configured, built,
# or neither) is left as it was: from a git checkout the copy is the
# committed tree plus uncommitted changes to tracked files (untracked files
# are left out); elsewhere (an unpacked tarball) it is the whole directory,
# made clean there. OUTDIR gets sluice_VERSION_ARCH.deb (and its -dbgsym),
# their .buildinfo and .changes, and lintian.txt (lintian's report, when
# lintian is installed: any error fails the build). dpkg-buildpackage runs
# "make check" unless DEB_BUILD_OPTIONS contains nocheck; it compiles with
# as many jobs as there are CPUs unless DEB_BUILD_OPTIONS says parallel=N
# (make check runs one suite at a time either way: debian/rules).
set -eu

srcdir=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$srcdir/_deb}

for tool in dpkg-buildpackage dpkg-parsechangelog; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "build-deb.sh: $tool is missing: install the Debian packages" \
            "dpkg-dev and debhelper (contrib/setup-debian.sh)" >&2
        exit 1
    fi
done

# The package's version is configure.ac's: a release bumps both.
version=$(sed -n 's/^AC_INIT(\[sluice\], \[\([^]]*\)\].*/\1/p' \
    "$srcdir/configure.ac")
deb_version=$(dpkg-parsechangelog -l "$srcdir/debian/changelog" -S Version)
if [ -z "$version" ] || [ "$version" != "$deb_version" ]; then
    echo "build-deb.sh: debian/changelog says $deb_version but configure.ac's" \
        "AC_INIT says ${version:-nothing}: add a changelog entry (dch -v)" >&2
    exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/sluice-deb.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT TERM
# make check drops workers to nobody (--user): they must reach the build
chmod 755 "$tmp"
tree=$tmp/sluice-$version
mkdir "$tree"

if git -C "$srcdir" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    # a commit of the working tree's tracked files, made without touching
    # the tree or the stash; nothing to record when the tree is clean
    snapshot=$(git -C "$srcdir" stash create)
    git -C "$srcdir" archive "${snapshot:-HEAD}" | tar -x -C "$tree"
else
    (cd "$srcdir" && tar -c --exclude=./_deb .) | tar -x -C "$tree"
    if [ -f "$tree/config.status" ]; then
        (cd "$tree" && make distclean >/dev/null)
    fi
fi

case " ${DEB_BUILD_OPTIONS:-} " in
*" parallel="*) ;;
*) DEB_BUILD_OPTIONS="${DEB_BUILD_OPTIONS:-} parallel=$(nproc)" ;;
esac
export DEB_BUILD_OPTIONS
# nocheck also drops the test-only Build-Depends (<!nocheck> in
# debian/control): the nocheck build profile goes with the option.
case " $DEB_BUILD_OPTIONS " in
*" nocheck "*)
    case " ${DEB_BUILD_PROFILES:-} " in
    *" nocheck "*) ;;
    *) DEB_BUILD_PROFILES="${DEB_BUILD_PROFILES:+$DEB_BUILD_PROFILES }nocheck" ;;
    esac
    export DEB_BUILD_PROFILES
    ;;
esac
(cd "$tree" && dpkg-buildpackage -us -uc -b)

arch=$(dpkg-architecture -qDEB_HOST_ARCH)
deb=sluice_${version}_$arch.deb
mkdir -p "$out"
for f in "$deb" "sluice-dbgsym_${version}_$arch.deb" \
    "sluice_${version}_$arch.buildinfo" "sluice_${version}_$arch.changes"; do
    if [ -f "$tmp/$f" ]; then # no -dbgsym with DEB_BUILD_OPTIONS=noautodbgsym
        cp "$tmp/$f" "$out/"
    fi
done

if command -v lintian >/dev/null 2>&1; then
    # --fail-on error: warnings are reported, errors fail
    if ! lintian --fail-on error "$out/$deb" >"$out/lintian.txt" 2>&1; then
        cat "$out/lintian.txt" >&2
        echo "build-deb.sh: lintian found errors in $out/$deb" >&2
        exit 1
    fi
    cat "$out/lintian.txt"
else
    echo "build-deb.sh: lintian is not installed: the package is unchecked" >&2
fi
echo "build-deb.sh: $out/$deb"
