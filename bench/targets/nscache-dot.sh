#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# nscache forwarding over DNS over TLS (issue 11) to the benchmark NSD's TLS port, otherwise
# as targets/nscache.sh. Environment (set by bench/run): BENCH_PORT, BENCH_UPSTREAM_TLS_PORT,
# BENCH_TLS_CA (the CA of NSD's certificate for bench.test), BENCH_WORKDIR, BENCH_NSCACHE.
set -eu
printf 'tls-ca-file = "%s"\n%s\n' "$BENCH_TLS_CA" "${BENCH_NSCACHE_CONFIG:-}" \
    > "$BENCH_WORKDIR/nscache.toml"
exec "${BENCH_NSCACHE:-build/nscache}" serve --config "$BENCH_WORKDIR/nscache.toml" \
    --listen "127.0.0.1:$BENCH_PORT" \
    --upstream "tls://127.0.0.1:$BENCH_UPSTREAM_TLS_PORT#bench.test" \
    --threads 1 --cache-size "${BENCH_NSCACHE_CACHE_SIZE:-256M}" \
    --control "$BENCH_WORKDIR/control.sock"
