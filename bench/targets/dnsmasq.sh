#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# dnsmasq as a caching forwarder to the benchmark's NSD (dnsmasq is single-threaded).
# Environment (set by bench/run): BENCH_PORT, BENCH_UPSTREAM_PORT, BENCH_WORKDIR.
# dnsmasq 2.90 has no upper limit on cache-size (older ones capped it at 10000). It allocates
# the whole cache at start, so its RSS hardly grows as it fills: compare its total RSS.
set -eu
conf="$BENCH_WORKDIR/dnsmasq.conf"
cat > "$conf" <<CONF
port=$BENCH_PORT
listen-address=127.0.0.1
bind-interfaces
no-resolv
no-hosts
no-poll
server=127.0.0.1#$BENCH_UPSTREAM_PORT
cache-size=1100000
dns-forward-max=5000
user=root
group=root
pid-file=
CONF
exec dnsmasq -k -C "$conf"
