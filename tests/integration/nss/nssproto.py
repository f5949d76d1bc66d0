# SPDX-License-Identifier: BSD-3-Clause
"""nss/protocol.h in Python, for the tests: socket messages, payload encoding, map keys and
hash, a map writer that follows the daemon's rules (a sealed memfd; seqlocked slots: odd
while writing, even when done), and a client that asks a daemon for its map.

Integers are host order (little-endian on the machines we test on)."""

import fcntl
import ipaddress
import mmap
import os
import socket
import struct
import time

VERSION = 2
REQUEST_MAGIC = 0x5143534E
RESPONSE_MAGIC = 0x5243534E
MAP_MAGIC = 0x4D43534E
SLOT_SIZE = 1024
KEY_MAX = 260
MAX_DATA = 1024
MAX_PAYLOAD = 16384

BY_NAME, BY_ADDR, GET_MAP = 1, 2, 3
FOUND, NOTFOUND, NODATA, TRYAGAIN, UNAVAIL = 0, 1, 2, 3, 4

REQUEST = struct.Struct("=IHHiI")            # magic, version, op, family, data_len
RESPONSE = struct.Struct("=IHHiIII")         # magic, version, status, family, ttl, payload_len, map_id
HEADER = struct.Struct("=IIIIIIII4Q")        # magic, version, slot_count, slot_size, live, generation, map_id
SLOT = struct.Struct("=IIQqHHIII")           # seq, generation, key_hash, expires_ms, key_len, status, ttl, payload_len, reserved
assert REQUEST.size == 16 and RESPONSE.size == 24 and HEADER.size == 64 and SLOT.size == 40
SLOT_DATA = SLOT_SIZE - SLOT.size

AF_INET, AF_INET6, AF_UNSPEC = socket.AF_INET, socket.AF_INET6, socket.AF_UNSPEC

F_SEAL_SEAL, F_SEAL_SHRINK, F_SEAL_GROW, F_SEAL_FUTURE_WRITE = 0x1, 0x2, 0x4, 0x10
MAP_SEALS = F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE


def map_key(op, family, data):
    """nscache_map_key: op, family byte (4, 6, 0), lower-cased name without trailing dot."""
    if op == BY_NAME:
        data = data.lower()
        if data.endswith(b"."):
            data = data[:-1]
    fam = 4 if family == AF_INET else 6 if family == AF_INET6 else 0
    return bytes([op, fam]) + data


def map_hash(key):
    h = 0xCBF29CE484222325
    for b in key:
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def encode_payload(canon="", aliases=(), v4=(), v6=()):
    out = bytearray()

    def name(s):
        b = s.encode() if isinstance(s, str) else s
        out.extend(struct.pack("=H", len(b)))
        out.extend(b)

    name(canon)
    out.extend(struct.pack("=H", len(aliases)))
    for a in aliases:
        name(a)
    out.extend(struct.pack("=H", len(v4)))
    for a in v4:
        out.extend(ipaddress.IPv4Address(a).packed)
    out.extend(struct.pack("=H", len(v6)))
    for a in v6:
        out.extend(ipaddress.IPv6Address(a).packed)
    return bytes(out)


def monotonic_ms():
    return int(time.clock_gettime(time.CLOCK_MONOTONIC) * 1000)


class MapWriter:
    """Creates a map as the daemon does (a memfd, mapped read-write, then sealed) and writes
    slots with the seqlock. `fd` is what a GET_MAP response passes."""

    def __init__(self, slot_count=64, seals=MAP_SEALS):
        self.slot_count = slot_count
        self.size = HEADER.size + slot_count * SLOT_SIZE
        self.fd = os.memfd_create("fake-hosts-map", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        os.ftruncate(self.fd, self.size)
        self.mm = mmap.mmap(self.fd, self.size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self.generation = 1
        self.map_id = int.from_bytes(os.urandom(4), "little") or 1
        self.mm[0:HEADER.size] = HEADER.pack(MAP_MAGIC, VERSION, slot_count, SLOT_SIZE, 1, 1, self.map_id, 0,
                                             0, 0, 0, 0)
        if seals:
            fcntl.fcntl(self.fd, fcntl.F_ADD_SEALS, seals)

    def _slot_off(self, i):
        return HEADER.size + i * SLOT_SIZE

    def set_live(self, live):
        self.mm[16:20] = struct.pack("=I", live)

    def flush(self):
        self.generation += 1
        self.mm[20:24] = struct.pack("=I", self.generation)

    def slot_index(self, key):
        return map_hash(key) & (self.slot_count - 1)

    def put(self, op, family, data, status, payload=b"", ttl_s=60, expires_ms=None, neighbour=False,
            generation=None):
        key = map_key(op, family, data)
        if expires_ms is None:
            expires_ms = monotonic_ms() + ttl_s * 1000
        gen = self.generation if generation is None else generation
        idx = self.slot_index(key) ^ (1 if neighbour else 0)
        off = self._slot_off(idx)
        assert len(key) + len(payload) <= SLOT_DATA
        seq = struct.unpack_from("=I", self.mm, off)[0]
        self.mm[off:off + 4] = struct.pack("=I", seq + 1)
        body = SLOT.pack(seq + 1, gen, map_hash(key), expires_ms, len(key), status, ttl_s, len(payload), 0)
        self.mm[off + 4:off + SLOT.size] = body[4:]
        self.mm[off + SLOT.size:off + SLOT.size + len(key) + len(payload)] = key + payload
        self.mm[off:off + 4] = struct.pack("=I", seq + 2)
        return idx

    def close(self):
        self.mm.close()
        os.close(self.fd)


def get_map(sock_path, timeout=5):
    """Asks the daemon at sock_path for its map: (response fields, size, fd or None)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(str(sock_path))
        s.sendall(REQUEST.pack(REQUEST_MAGIC, VERSION, GET_MAP, AF_UNSPEC, 0))
        data, fds, _, _ = socket.recv_fds(s, RESPONSE.size + 8, 4)
        while len(data) < RESPONSE.size + 8:
            more = s.recv(RESPONSE.size + 8 - len(data))
            if not more:
                break
            data += more
        fields = RESPONSE.unpack(data[:RESPONSE.size])
        size = struct.unpack("=Q", data[RESPONSE.size:RESPONSE.size + 8])[0] if len(data) >= RESPONSE.size + 8 else None
        for extra in fds[1:]:
            os.close(extra)
        return fields, size, (fds[0] if fds else None)
