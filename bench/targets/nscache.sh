#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# nscache as a caching forwarder to the benchmark's NSD: one worker thread, 256 MiB cache (room for about 2M small answers),
# every other option at its default (prefetch and serve-stale on).
# Environment (set by bench/run): BENCH_PORT, BENCH_UPSTREAM_PORT, BENCH_WORKDIR, and
# BENCH_NSCACHE (the binary; default build/nscache), BENCH_NSCACHE_CACHE_SIZE (default 256M),
# BENCH_NSCACHE_CONFIG (TOML lines for its config file, e.g. 'prefetch = false').
# Arguments are passed on (bench/restart/run adds --takeover).
# The NSS socket too is in the work folder: the default /run/nscache/nss.sock (and its lock)
# would touch the host and refuse a second bench's nscache.
# The config file is our own, so /etc/nscache/nscache.toml stays out of the measurement.
set -eu
printf '%s\n' "${BENCH_NSCACHE_CONFIG:-}" > "$BENCH_WORKDIR/nscache.toml"
exec "${BENCH_NSCACHE:-build/nscache}" serve --config "$BENCH_WORKDIR/nscache.toml" \
    --listen "127.0.0.1:$BENCH_PORT" --upstream "127.0.0.1:$BENCH_UPSTREAM_PORT" \
    --threads 1 --cache-size "${BENCH_NSCACHE_CACHE_SIZE:-256M}" \
    --control "$BENCH_WORKDIR/control.sock" --nss-socket "$BENCH_WORKDIR/nss.sock" "$@"
