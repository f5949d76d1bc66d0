#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# PowerDNS Recursor forwarding everything to the benchmark's NSD: one worker thread, record
# and packet caches for >1M names. Environment (set by bench/run): BENCH_PORT,
# BENCH_UPSTREAM_PORT, BENCH_WORKDIR. Reads only its own recursor.conf (--config-dir).
set -eu
cat > "$BENCH_WORKDIR/recursor.conf" <<CONF
local-address=127.0.0.1
local-port=$BENCH_PORT
allow-from=127.0.0.0/8
query-local-address=127.0.0.1
forward-zones-recurse=.=127.0.0.1:$BENCH_UPSTREAM_PORT
threads=1
pdns-distributes-queries=no
daemon=no
write-pid=no
socket-dir=$BENCH_WORKDIR
security-poll-suffix=
dnssec=off
max-cache-entries=4000000
max-packetcache-entries=4000000
max-negative-ttl=3600
loglevel=4
disable-syslog=yes
CONF
exec pdns_recursor --config-dir="$BENCH_WORKDIR"
