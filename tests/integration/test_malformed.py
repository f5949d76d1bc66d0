# SPDX-License-Identifier: BSD-3-Clause
"""Malformed client packets: each gets FORMERR (or NOTIMP, or silence where there is nothing
to answer), and the daemon keeps answering valid queries afterwards."""

import random
import socket
import struct
import time

import dns.rcode
import pytest

from harness import ZONE
from dnshelpers import a_addrs, header, rcode_of, tcp, tcp_raw_exchange, udp, udp_raw

QID = 0x4242
TYPE_A_IN = struct.pack("!HH", 1, 1)


def hdr(qid=QID, flags=0x0100, qd=1, an=0, ns=0, ar=0):
    return struct.pack("!HHHHHH", qid, flags, qd, an, ns, ar)


def name_wire(name):
    out = b""
    for label in name.split("."):
        if label:
            out += bytes([len(label)]) + label.encode()
    return out + b"\x00"


def _random_nonterminating(seed, n=60):
    rng = random.Random(seed)
    return bytes(rng.randint(1, 0x3F) for _ in range(n))


def _random_blob(seed, n=100):
    rng = random.Random(seed)
    b = bytearray(rng.getrandbits(8) for _ in range(n))
    b[0], b[1] = QID >> 8, QID & 0xFF
    b[2] &= 0x07  # QR=0, opcode 0 (keep AA/TC/RD bits random)
    return bytes(b)


GOOD_Q = name_wire(f"www.{ZONE}") + TYPE_A_IN

# (id, packet, expectation)
#   formerr: an answer with RCODE FORMERR and our ID
#   notimp:  an answer with RCODE NOTIMP and our ID
#   silence: no answer at all
#   formerr_or_silence: too short to carry a full header, either is right
#   survive: anything (or nothing), as long as the daemon keeps working
CORPUS = [
    ("empty", b"", "silence"),
    ("one_byte", b"\x42", "silence"),
    ("short_5", hdr()[:5], "formerr_or_silence"),
    ("short_11", hdr()[:11], "formerr_or_silence"),
    ("header_only_qd1", hdr(), "formerr"),
    ("garbage_name_runs_off_end", hdr() + _random_nonterminating(1), "formerr"),
    ("garbage_name_runs_off_end_2", hdr() + _random_nonterminating(2, 200), "formerr"),
    ("random_blob_1", _random_blob(11), "survive"),
    ("random_blob_2", _random_blob(12, 300), "survive"),
    ("random_blob_3", _random_blob(13, 20), "survive"),
    ("compression_loop", hdr() + b"\xc0\x0c" + TYPE_A_IN, "formerr"),
    ("compression_loop_2", hdr() + b"\x03abc\xc0\x0c" + TYPE_A_IN, "formerr"),
    ("pointer_out_of_packet", hdr() + b"\x03abc\xc3\xff" + TYPE_A_IN, "formerr"),
    ("label_64", hdr() + b"\x40" + b"a" * 64 + b"\x00" + TYPE_A_IN, "formerr"),
    ("label_type_10", hdr() + b"\x80" + b"a" * 10 + b"\x00" + TYPE_A_IN, "formerr"),
    ("name_over_255", hdr() + b"".join(b"\x3f" + b"a" * 63 for _ in range(5)) + b"\x00" + TYPE_A_IN, "formerr"),
    ("name_256", hdr() + b"".join(b"\x3f" + b"b" * 63 for _ in range(3)) + b"\x3e" + b"c" * 62 + b"\x00"
     + TYPE_A_IN, "formerr"),
    ("truncated_qtype", hdr() + name_wire(f"www.{ZONE}") + b"\x00", "formerr"),
    ("label_past_end", hdr() + b"\x05ab", "formerr"),
    ("qdcount_0", hdr(qd=0), "formerr"),
    ("qdcount_0_with_question_bytes", hdr(qd=0) + GOOD_Q, "formerr"),
    ("qdcount_2", hdr(qd=2) + GOOD_Q + GOOD_Q, "formerr"),
    ("qdcount_2_one_present", hdr(qd=2) + GOOD_Q, "formerr"),
    ("opcode_iquery", hdr(flags=0x0100 | (1 << 11)) + GOOD_Q, "notimp"),
    ("opcode_status", hdr(flags=0x0100 | (2 << 11)) + GOOD_Q, "notimp"),
    ("opcode_notify", hdr(flags=(4 << 11)) + GOOD_Q, "notimp"),
    ("opcode_update", hdr(flags=(5 << 11)) + GOOD_Q, "notimp"),
    ("opcode_15", hdr(flags=0x0100 | (15 << 11)) + GOOD_Q, "notimp"),
    ("opcode_notify_cd", hdr(flags=(4 << 11) | 0x0010) + GOOD_Q, "notimp"),
    ("qr_set", hdr(flags=0x8100) + GOOD_Q, "silence"),
    ("qr_set_response_like", hdr(flags=0x8580, an=0) + GOOD_Q, "silence"),
]


def check_answer(case, wire, reply):
    if case == "silence":
        assert reply is None, f"expected no answer, got {reply!r}"
        return
    if case == "survive":
        if reply is not None and len(reply) >= 12:
            assert header(reply)[0] == QID and header(reply)[1] & 0x8000
        return
    if case == "formerr_or_silence":
        if reply is None:
            return
        assert len(reply) >= 12 and rcode_of(reply) == dns.rcode.FORMERR and header(reply)[1] & 0x8000
        return
    assert reply is not None, f"expected {case.upper()}, got no answer"
    assert len(reply) >= 12, f"answer shorter than a header: {reply!r}"
    qid, flags = header(reply)[:2]
    assert qid == QID, "the answer must carry the query's ID"
    assert flags & 0x8000, "QR must be set"
    want = dns.rcode.FORMERR if case == "formerr" else dns.rcode.NOTIMP
    assert flags & 0xF == want, f"RCODE {flags & 0xF}, want {dns.rcode.to_text(want)}"
    if case == "notimp":
        assert (flags >> 11) & 0xF == (header(wire)[1] >> 11) & 0xF, "opcode is echoed"
        if (flags >> 11) & 0xF:
            # RA and CD mean something for standard queries only (RFC 6895 §2).
            assert not flags & 0x0080, "RA in the NOTIMP answer to an unknown opcode"
            assert not flags & 0x0010, "CD in the NOTIMP answer to an unknown opcode"


def assert_still_serving(d):
    r = udp(d.port, f"www.{ZONE}", "A", timeout=5)
    assert a_addrs(r) == ["192.0.2.1"]
    r = tcp(d.port, f"www.{ZONE}", "A", timeout=5)
    assert a_addrs(r) == ["192.0.2.1"]


@pytest.mark.parametrize("name,wire,case", CORPUS, ids=[c[0] for c in CORPUS])
def test_malformed_udp(daemon, nsd, name, wire, case):
    d = daemon(nsd.addr)
    s0 = d.stats()
    wait = 1.0 if case in ("silence", "formerr_or_silence", "survive") else 3.0
    reply = udp_raw(d.port, wire, timeout=wait)
    check_answer(case, wire, reply)
    assert d.proc.poll() is None, f"daemon died on {name}:\n{d.stderr_text()}"
    assert_still_serving(d)
    s1 = d.stats()
    if case == "formerr":
        assert s1["answers_formerr"] >= s0["answers_formerr"] + 1
    if case == "notimp":
        assert s1["answers_notimp"] >= s0["answers_notimp"] + 1
    if case in ("formerr", "notimp"):
        # the malformed one plus the two valid ones
        assert s1["queries"] >= s0["queries"] + 3, "malformed queries count in `queries` too"


@pytest.mark.threaded
def test_malformed_burst_then_valid(daemon, nsd):
    # The whole corpus (and more garbage) at once, then a valid query.
    d = daemon(nsd.addr)
    rng = random.Random(99)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _ in range(3):
            for _, wire, _ in CORPUS:
                s.sendto(wire, ("127.0.0.1", d.port))
        for _ in range(200):
            s.sendto(bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 600))), ("127.0.0.1", d.port))
    time.sleep(0.3)
    assert d.proc.poll() is None, d.stderr_text()
    assert_still_serving(d)


@pytest.mark.parametrize("name,wire,case", [c for c in CORPUS if c[2] in ("formerr", "notimp")][:8],
                         ids=[c[0] for c in CORPUS if c[2] in ("formerr", "notimp")][:8])
def test_malformed_tcp(daemon, nsd, name, wire, case):
    d = daemon(nsd.addr)
    replies = tcp_raw_exchange(d.port, [wire], timeout=3)
    # Over TCP the daemon may answer or close the connection; if it answers, it answers right.
    if replies:
        check_answer(case, wire, replies[0])
    assert d.proc.poll() is None, d.stderr_text()
    assert_still_serving(d)


def test_tcp_broken_framing(daemon, nsd):
    d = daemon(nsd.addr)
    # a zero-length frame
    tcp_raw_exchange(d.port, [b""], timeout=1.5)
    # a length prefix promising more than ever comes, then close
    with socket.create_connection(("127.0.0.1", d.port), timeout=3) as s:
        s.sendall(b"\x01\x00abc")
    # one byte, then close
    with socket.create_connection(("127.0.0.1", d.port), timeout=3) as s:
        s.sendall(b"\x00")
    # connect and close at once, a few times
    for _ in range(5):
        socket.create_connection(("127.0.0.1", d.port), timeout=3).close()
    # an abortive close (RST)
    s = socket.create_connection(("127.0.0.1", d.port), timeout=3)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.sendall(b"\x00\x20")
    s.close()
    time.sleep(0.2)
    assert d.proc.poll() is None, d.stderr_text()
    assert_still_serving(d)


# --------------------------------------------------------------------------------------
# What a query may carry after its question, and who gets answered at all
# --------------------------------------------------------------------------------------

A_RECORD = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 300, 4) + bytes([192, 0, 2, 99])
OPT_RECORD = b"\x00" + struct.pack("!HHIH", 41, 1232, 0, 0)


def pointer_chain_bomb(chain=1000, records=170):
    """About 4 KB: a chain of backward compression pointers (in a private-type record's
    rdata) and `records` records owned by its last pointer. Without a cap on pointer hops per
    name each of those records costs the whole chain (170,000 hops for one query)."""
    question = name_wire(f"www.{ZONE}") + TYPE_A_IN
    head = hdr(ar=1 + records) + question
    chain_start = len(head) + 11
    rdata = struct.pack("!H", 0xC000 | 12)
    for k in range(1, chain):
        rdata += struct.pack("!H", 0xC000 | (chain_start + 2 * (k - 1)))
    body = b"\x00" + struct.pack("!HHIH", 65280, 1, 0, len(rdata)) + rdata
    end = chain_start + 2 * (chain - 1)
    for _ in range(records):
        body += struct.pack("!H", 0xC000 | end) + struct.pack("!HHIH", 1, 1, 0, 0)
    return head + body


def assert_formerr_echoing_question(wire, reply):
    assert reply is not None, "no answer"
    assert header(reply)[0] == QID and header(reply)[1] & 0x8000
    assert rcode_of(reply) == dns.rcode.FORMERR, f"RCODE {rcode_of(reply)}, want FORMERR"
    assert header(reply)[2] == 1 and reply[12:12 + len(GOOD_Q)] == GOOD_Q


@pytest.mark.parametrize("section", ["answer", "authority"])
def test_query_with_answer_or_authority_records_is_formerr(daemon, nsd, section):
    d = daemon(nsd.addr)
    counts = {"an": 1} if section == "answer" else {"ns": 1}
    wire = hdr(**counts) + GOOD_Q + A_RECORD
    assert_formerr_echoing_question(wire, udp_raw(d.port, wire, timeout=3))
    replies = tcp_raw_exchange(d.port, [wire], timeout=3)
    assert replies, "no answer over TCP"
    assert_formerr_echoing_question(wire, replies[0])
    assert_still_serving(d)


def test_pointer_chain_bomb_is_formerr(daemon, nsd):
    d = daemon(nsd.addr)
    wire = pointer_chain_bomb()
    assert 3500 < len(wire) <= 4096
    assert_formerr_echoing_question(wire, udp_raw(d.port, wire, timeout=3))
    replies = tcp_raw_exchange(d.port, [wire], timeout=3)
    assert replies, "no answer over TCP"
    assert_formerr_echoing_question(wire, replies[0])
    assert_still_serving(d)


# From a sender outside `allow`: each gets REFUSED, whatever it carries after (or instead of)
# a well-formed question, and never more bytes than it sent.
REFUSED_CASES = [
    ("plain", hdr() + GOOD_Q),
    ("edns", hdr(ar=1) + GOOD_Q + OPT_RECORD),
    ("edns_then_garbage", hdr(ar=2) + GOOD_Q + OPT_RECORD + b"\xc0"),
    ("answer_record", hdr(an=1) + GOOD_Q + A_RECORD),
    ("pointer_chain_bomb", pointer_chain_bomb()),
    ("qdcount_2", hdr(qd=2) + GOOD_Q + GOOD_Q),
    ("header_only", hdr()),
    ("notify", hdr(flags=(4 << 11)) + GOOD_Q),
    ("axfr", hdr() + name_wire(ZONE) + struct.pack("!HH", 252, 1)),
    ("edns_version_1", hdr(ar=1) + GOOD_Q + b"\x00" + struct.pack("!HHIH", 41, 1232, 1 << 16, 0)),
]


def test_disallowed_sender_gets_refused_no_longer_than_its_query(daemon, nsd):
    d = daemon(nsd.addr, config='allow = ["192.0.2.0/24"]\n')  # 127.0.0.1 is outside
    s0 = d.stats()
    for name, wire in REFUSED_CASES:
        reply = udp_raw(d.port, wire, timeout=3)
        assert reply is not None, f"{name}: no answer"
        assert len(reply) <= len(wire), f"{name}: {len(reply)}-byte answer to a {len(wire)}-byte query"
        assert header(reply)[0] == QID and header(reply)[1] & 0x8000, name
        assert rcode_of(reply) == dns.rcode.REFUSED, f"{name}: RCODE {rcode_of(reply)}, want REFUSED"
        # Over TCP the access check runs at accept: nothing at all.
        assert not tcp_raw_exchange(d.port, [wire], timeout=3), f"{name}: answered over TCP"
    # Runts and responses still get nothing.
    assert udp_raw(d.port, hdr()[:5], timeout=1) is None
    assert udp_raw(d.port, hdr(flags=0x8100) + GOOD_Q, timeout=1) is None
    s1 = d.stats()
    assert s1["answers_refused"] - s0["answers_refused"] == len(REFUSED_CASES)
    assert s1["tcp_rejected"] - s0["tcp_rejected"] == len(REFUSED_CASES)
    assert s1["answers_formerr"] == s0["answers_formerr"]
    assert s1["answers_notimp"] == s0["answers_notimp"]
    assert d.proc.poll() is None, d.stderr_text()


def test_refused_echoes_the_senders_opt(daemon, nsd):
    d = daemon(nsd.addr, config='allow = ["192.0.2.0/24"]\nedns-buffer-size = 4096\n')
    wire = hdr(ar=1) + GOOD_Q + b"\x00" + struct.pack("!HHIH", 41, 1232, 0x8000, 0)  # DO
    reply = udp_raw(d.port, wire, timeout=3)
    assert reply is not None and rcode_of(reply) == dns.rcode.REFUSED
    assert len(reply) == len(wire)
    m = dns.message.from_wire(reply)
    assert m.edns == 0 and m.payload == 4096 and m.ednsflags & dns.flags.DO


# --------------------------------------------------------------------------------------
# Error answers advertise the configured EDNS buffer size
# --------------------------------------------------------------------------------------

def test_error_answers_advertise_configured_edns_buffer_size(daemon, nsd):
    d = daemon(nsd.addr, config="edns-buffer-size = 4096\n")
    cases = [
        ("notimp_axfr", hdr(ar=1) + name_wire(ZONE) + struct.pack("!HH", 252, 1) + OPT_RECORD,
         dns.rcode.NOTIMP),
        ("badvers", hdr(ar=1) + GOOD_Q + b"\x00" + struct.pack("!HHIH", 41, 1232, 1 << 16, 0),
         dns.rcode.BADVERS),
    ]
    for name, wire, want in cases:
        reply = udp_raw(d.port, wire, timeout=3)
        assert reply is not None, f"{name}: no answer"
        m = dns.message.from_wire(reply)
        assert m.rcode() == want, f"{name}: {dns.rcode.to_text(m.rcode())}"
        assert m.edns == 0, f"{name}: no OPT in the answer"
        assert m.payload == 4096, f"{name}: the answer advertises {m.payload}, configured 4096"
