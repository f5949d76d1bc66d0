#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Writes the pointer-chain bomb seeds of fuzz/corpus (committed; rerun to regenerate).

A chain of compression pointers, each pointing at the one before it (backwards, so no loop),
sits in the rdata of a private-type record; every later record's owner points at the chain's
end. Backward pointers alone do not bound the work: each of those owners walks the whole
chain, so the hops grow with the square of the message's size. fuzz_query_parser and
fuzz_upstream_response check that the hops stay within a constant times the input's size;
these seeds break that on any walker without a cap on hops per name (dns/name.h).
"""

import struct
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
HEADER = 12
TYPE_A, TYPE_NULL, TYPE_PRIVATE = 1, 10, 65280


def name_wire(name):
    return b"".join(bytes([len(l)]) + l.encode() for l in name.split(".") if l) + b"\x00"


def pointer(target):
    return struct.pack("!H", 0xC000 | target)


def chain_and_records(start, chain, records, owner_type, ttl):
    """The chain record (root owner), then `records` records owned by the chain's end."""
    chain_start = start + 1 + 10  # root owner, fixed fields
    rdata = pointer(HEADER)  # the first link points at the question's name
    for k in range(1, chain):
        rdata += pointer(chain_start + 2 * (k - 1))
    out = b"\x00" + struct.pack("!HHIH", TYPE_PRIVATE, 1, ttl, len(rdata)) + rdata
    end_of_chain = chain_start + 2 * (chain - 1)
    for _ in range(records):
        out += pointer(end_of_chain) + struct.pack("!HHIH", owner_type, 1, ttl, 0)
    return out


def query_bomb(chain=1000, records=170):
    question = name_wire("bomb.test") + struct.pack("!HH", TYPE_A, 1)
    head = struct.pack("!HHHHHH", 0x0B0B, 0x0100, 1, 0, 0, 1 + records) + question
    return head + chain_and_records(len(head), chain, records, TYPE_A, 0)


def response_bomb(chain=2048, records=340):
    question = name_wire("bomb.test") + struct.pack("!HH", TYPE_A, 1)
    head = struct.pack("!HHHHHH", 0x0B0B, 0x8180, 1, 1 + records, 0, 0) + question
    return head + chain_and_records(len(head), chain, records, TYPE_NULL, 300)


def main():
    for target, data in (("fuzz_query_parser", query_bomb()),
                         ("fuzz_upstream_response", response_bomb())):
        path = HERE / "corpus" / target / "pointer_chain_bomb"
        path.write_bytes(data)
        print(f"{path.relative_to(HERE.parent)}: {len(data)} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
