#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Installs the Debian packages nscache needs to build and test (README lists why each is
# there). Run as root, or with sudo available.
set -euo pipefail

packages=(
  # build
  make cmake ninja-build g++ pkg-config libtomlplusplus-dev libssl-dev
  make cmake ninja-build g++ pkg-config libtomlplusplus-dev libhiredis-dev
  # DNS over HTTPS, served and forwarded: HTTP/2
  libnghttp2-dev
  # unit tests and micro-benchmarks
  googletest libgtest-dev libbenchmark-dev
  # integration tests: a real upstream, real clients, the fake upstream's language
  nsd bind9-dnsutils knot-dnsutils python3 python3-pytest python3-pytest-xdist python3-dnspython
  # DNS over TLS tests: a real DoT server, and the test CA's tool
  unbound openssl
  # DNS over HTTPS tests: clients (curl --http2), and HTTP/2 frames crafted for the abuse tests
  curl python3-h2
  # the nscd front's tests: trace a warm getaddrinfo, give the test namespace an IPv6 address
  strace iproute2
  # the user-database tests: a static musl client (musl asks nscd's socket for passwd/group)
  musl-tools
  # the shared tier's tests: real Redis and Redis Cluster (redis-cli comes with redis-tools)
  redis-server redis-tools
  # fuzzing and sanitizers
  clang clang-format libfuzzer-14-dev libclang-rt-14-dev
  # the Debian package: build it, lint it, install it in a throwaway root (systemd-sysusers)
  dpkg-dev debhelper lintian systemd
)

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

export DEBIAN_FRONTEND=noninteractive
as_root apt-get update -q
as_root apt-get install -y -q --no-install-recommends "${packages[@]}"
