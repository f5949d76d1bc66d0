#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The do-nothing responder (bench/responder.cpp): no cache, no upstream, one fixed answer.
# It shows the ceiling of this machine's loopback path. Environment: BENCH_PORT,
# BENCH_RESPONDER (the binary; default bench/build/responder).
set -eu
exec "${BENCH_RESPONDER:-bench/build/responder}" --listen "127.0.0.1:$BENCH_PORT"
