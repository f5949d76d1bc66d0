# SPDX-License-Identifier: BSD-3-Clause
"""What the nscd tests share: the namespaces' files and the one record table both servers
serve (NSD in the namespaces, what `files dns` asks; the daemon's fake upstream)."""

SOCKET = "/var/run/nscd/socket"
RESOLV_CONF = "nameserver 127.0.0.1\nsearch example.test\noptions ndots:1 timeout:1 attempts:1\n"
HOSTS = ("127.0.0.1 localhost\n::1 localhost ip6-localhost\n"
         "192.0.2.250 fromfiles.example.test fromfiles\n"
         "198.51.100.200 www.example.test\n")
NSSWITCH = "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nservices: files\n"

# One table for both servers: (name, type, ttl, rdatas).
RECORDS = [
    ("www.example.test.", "A", 300, ["198.51.100.1"]),
    ("dual.example.test.", "A", 300, ["198.51.100.3"]),
    ("dual.example.test.", "AAAA", 300, ["2001:db8:53::3"]),
    ("v6only.example.test.", "AAAA", 300, ["2001:db8:53::6"]),
    ("alias.example.test.", "CNAME", 300, ["www2.example.test."]),
    ("www2.example.test.", "A", 300, ["198.51.100.2"]),
    ("multi.example.test.", "A", 300, ["198.51.100.11", "198.51.100.12", "198.51.100.13"]),
    ("txtonly.example.test.", "TXT", 300, ['"no address"']),
    ("short.example.test.", "A", 2, ["198.51.100.77"]),
    ("pre.example.test.", "A", 3, ["198.51.100.88"]),
    # The one record the two servers disagree on: which one answered shows.
    ("crash.example.test.", "A", 300, ["198.51.100.91"]),
    ("1.100.51.198.in-addr.arpa.", "PTR", 300, ["www.example.test."]),
]


def zone_text():
    lines = ["$ORIGIN example.test.", "$TTL 300",
             "@ 600 IN SOA ns1 hostmaster 1 3600 900 604800 60", "@ 600 IN NS ns1", "ns1 IN A 127.0.0.1"]
    for name, rtype, ttl, rdatas in RECORDS:
        if not name.endswith("example.test."):
            continue
        if name == "crash.example.test.":
            rdatas = ["198.51.100.92"]
        for rd in rdatas:
            lines.append(f"{name} {ttl} IN {rtype} {rd}")
    return "\n".join(lines) + "\n"


def reverse_zone_text():
    return ("$ORIGIN 100.51.198.in-addr.arpa.\n$TTL 300\n"
            "@ 600 IN SOA ns1.example.test. hostmaster.example.test. 1 3600 900 604800 60\n"
            "@ 600 IN NS ns1.example.test.\n1 IN PTR www.example.test.\n")
