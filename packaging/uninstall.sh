#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# `make uninstall`: removes what `make install` put in place, as CMake's manifest lists it.
#   packaging/uninstall.sh BUILD [DESTDIR]
# Without DESTDIR: the live install (BUILD/install_manifest.txt), then ldconfig. With DESTDIR:
# the last staged install into that same DESTDIR (see install.sh).
# A configuration file edited since it was installed is kept (and named), as package managers
# keep changed conffiles. The nscache user is kept: files it owns (a cache file) may remain.
set -eu
build=$1
destdir=${2:-}
here=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "$destdir" ]; then
    manifest="$build/install_manifest.txt"
else
    manifest="$build/install_manifest.staged.txt"
    recorded=$(cat "$build/install_manifest.staged.destdir" 2>/dev/null || true)
    if [ "$recorded" != "$destdir" ]; then
        echo "uninstall: the last staged install went to '${recorded}', not '$destdir'" >&2
        exit 1
    fi
fi
if [ ! -f "$manifest" ]; then
    echo "uninstall: $manifest not found: nothing installed from $build" >&2
    exit 1
fi
while IFS= read -r entry || [ -n "$entry" ]; do  # the last line has no newline
    [ -n "$entry" ] || continue
    path="$destdir$entry"
    case "$entry" in
    /etc/nscache/nscache.toml)
        if [ -f "$path" ] && ! cmp -s "$path" "$here/nscache.toml.example"; then
            echo "uninstall: keeping $path (edited since it was installed)"
            continue
        fi
        ;;
    esac
    if [ -e "$path" ] || [ -L "$path" ]; then
        rm -f -- "$path"
        echo "removed $path"
    fi
    case "$entry" in
    /etc/nscache/*|*/share/doc/nscache/*) rmdir -- "$(dirname "$path")" 2>/dev/null || true ;;
    esac
done < "$manifest"
# An earlier install may have created the default config that the last one kept: still the
# shipped text, it is ours to remove.
config="$destdir/etc/nscache/nscache.toml"
if [ -f "$config" ] && cmp -s "$config" "$here/nscache.toml.example"; then
    rm -f -- "$config"
    echo "removed $config"
    rmdir -- "$destdir/etc/nscache" 2>/dev/null || true
fi
rm -f -- "$manifest"
[ -z "$destdir" ] || rm -f -- "$build/install_manifest.staged.destdir"
if [ -z "$destdir" ]; then
    if command -v ldconfig >/dev/null 2>&1; then ldconfig; fi
    if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
        systemctl daemon-reload || true
    fi
fi
