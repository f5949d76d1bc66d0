#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# dnsdist with a packet cache in front of the benchmark's NSD: one UDP listener thread,
# one backend. Environment (set by bench/run): BENCH_PORT, BENCH_UPSTREAM_PORT, BENCH_WORKDIR.
set -eu
conf="$BENCH_WORKDIR/dnsdist.conf"
cat > "$conf" <<CONF
setSecurityPollSuffix("")
setLocal("127.0.0.1:$BENCH_PORT")
setACL({"127.0.0.0/8"})
newServer({address="127.0.0.1:$BENCH_UPSTREAM_PORT", source="127.0.0.1", name="nsd",
           checkName="n0.bench.", sockets=1})
pc = newPacketCache(2000000, {maxTTL=86400, minTTL=0, temporaryFailureTTL=60,
                              staleTTL=60, dontAge=false, numberOfShards=1})
getPool(""):setCache(pc)
CONF
exec dnsdist --supervised --disable-syslog -C "$conf"
