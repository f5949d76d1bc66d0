#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# `make install`: cmake --install, keeping two records of what was installed apart:
#   BUILD/install_manifest.txt         the live system's install (DESTDIR empty)
#   BUILD/install_manifest.staged.txt  the last staged install (DESTDIR set), paths without
#                                      DESTDIR, which BUILD/install_manifest.staged.destdir names
# so a staged install (tests, packaging) never hides what `make uninstall` must remove from
# the live system.
#   packaging/install.sh BUILD PREFIX [DESTDIR]
set -eu
build=$1
prefix=$2
destdir=${3:-}
live="$build/install_manifest.txt"
if [ -z "$destdir" ]; then
    cmake --install "$build" --prefix "$prefix"
    if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
        systemctl daemon-reload || true
    fi
    exit 0
fi
case "$destdir" in
/*) ;;
*) echo "install: DESTDIR must be an absolute path" >&2; exit 2 ;;
esac
keep="$build/install_manifest.live.keep"
rm -f "$keep"
[ -f "$live" ] && cp -p "$live" "$keep"
restore() {
    if [ -f "$keep" ]; then mv -f "$keep" "$live"; fi
}
trap restore EXIT
rm -f "$live"
DESTDIR="$destdir" cmake --install "$build" --prefix "$prefix"
mv -f "$live" "$build/install_manifest.staged.txt"
printf '%s\n' "$destdir" > "$build/install_manifest.staged.destdir"
