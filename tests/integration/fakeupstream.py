# SPDX-License-Identifier: BSD-3-Clause
"""A scriptable fake upstream DNS server for nscache's integration tests.

It listens on 127.0.0.1 (or ::1), UDP and TCP on the same port, in background threads. Tests set its
behaviour through attributes (they may be changed while it runs):

    mode        "normal"    answer from the record table
                "drop"      record the query, never answer
                "servfail"  answer SERVFAIL
                "refused"   answer REFUSED
                "tc"        over UDP answer TC=1 with empty sections; over TCP answer fully
    delay_ms    wait this long before answering (UDP answers are sent from a timer, so the
                server keeps reading meanwhile)
    delays      {"name.": ms}: a delay for one name only (overrides delay_ms)
    forge       list of forgeries sent to the querier's address before the real answer
                (UDP only): "wrong_id", "wrong_question", "wrong_qtype", "wrong_source",
                "wrong_cookie" (all right but the client cookie), "no_cookie" (all right but
                no COOKIE option)
    forge_only  when True, send only the forgeries, never the real answer
    forge_gap_ms  how long after the forgeries the real answer follows
    ede         in "servfail" mode, an Extended DNS Error code (RFC 8914) to add
    udp_drop_first  drop (after recording) the first N UDP queries of each question
    cookies     over UDP, answer a query's DNS COOKIE (RFC 7873) with its client cookie and
                a server cookie made of it (RFC 9018 layout, a hash under `cookie_secret`)
    cookie_require  with `cookies`: a query without a valid server cookie gets BADCOOKIE
                (rcode 23) and a fresh server cookie
    formerr_on_cookie  answer FORMERR (without OPT) to any query carrying a COOKIE option, as
                old forwarders and home routers that reject unknown EDNS options do
    udp_loss    drop (after recording) each UDP query with this probability, drawn from
                `rng` (seeded: a test's losses are the same on every run)

Every query is recorded in `queries` (dicts with transport, name, rdtype, id, source).
Names are looked up case-insensitively in `records`; a name the table lacks gets NXDOMAIN
and a name without the asked type NODATA, both with the SOA of the zone `fake.test`
(TTL 600, MINIMUM 60 unless the test changes `soa_ttl` / `soa_minimum`).
"""

import hashlib
import os
import random
import socket
import struct
import threading
import time

import dns.edns
import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rrset

FORGED_A = "203.0.113.66"
FAKE_ZONE = "fake.test."


def free_port_pair(host="127.0.0.1", attempts=50):
    """Bind a UDP socket and a TCP listener on the same free port; return (udp, tcp, port)."""
    last = None
    for _ in range(attempts):
        fam = socket.AF_INET6 if ":" in host else socket.AF_INET
        udp = socket.socket(fam, socket.SOCK_DGRAM)
        try:
            udp.bind((host, 0))
            port = udp.getsockname()[1]
            tcp = socket.socket(fam, socket.SOCK_STREAM)
            tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                tcp.bind((host, port))
            except OSError as e:
                tcp.close()
                udp.close()
                last = e
                continue
            return udp, tcp, port
        except OSError as e:
            udp.close()
            last = e
    raise RuntimeError(f"no free UDP+TCP port pair on {host}: {last}")


def _recv_exact(sock, n, deadline):
    buf = b""
    while len(buf) < n:
        if time.monotonic() > deadline:
            raise TimeoutError
        try:
            chunk = sock.recv(n - len(buf))
        except socket.timeout:
            continue
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


class FakeUpstream:
    def __init__(self, host="127.0.0.1"):
        self.lock = threading.Lock()
        self.records = {}  # (lower-case name text, rdtype int) -> list of rrsets
        self.generator = None  # optional callable(qname: dns.name.Name, rdtype) -> list of rrsets or None
        self.mode = "normal"
        self.delay_ms = 0
        self.delays = {}  # lower-case absolute name -> delay in ms for that name only
        self.forge = []
        self.forge_only = False
        self.forge_gap_ms = 100
        self.ede = None  # an EDE INFO-CODE (RFC 8914) added to SERVFAIL answers, if set
        self.udp_drop_first = 0
        self.cookies = False
        self.cookie_require = False
        self.formerr_on_cookie = False
        self.cookie_secret = os.urandom(16)
        self.cookie_time = int(time.time())
        self.udp_loss = 0.0
        self.rng = random.Random(16)
        self._udp_seen = {}  # (name, rdtype) -> UDP queries received
        self.soa_ttl = 600
        self.soa_minimum = 60
        self.queries = []
        self.forged_sent = 0
        self.errors = []
        self._stop = threading.Event()
        self._threads = []
        self._timers = []
        self._tcp_conns = []
        self.udp, self.tcp, self.port = free_port_pair(host)
        self.udp.settimeout(0.2)
        self.tcp.listen(64)
        self.tcp.settimeout(0.2)
        fam = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.forge_sock = socket.socket(fam, socket.SOCK_DGRAM)
        self.forge_sock.bind((host, 0))
        self.host = host
        self.addr = f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"

    # ---- configuration -------------------------------------------------------------
    def add(self, name, rdtype, ttl, *rdatas):
        rrset = dns.rrset.from_text(name, ttl, "IN", rdtype, *rdatas)
        key = (rrset.name.to_text().lower(), rrset.rdtype)
        with self.lock:
            self.records.setdefault(key, []).append(rrset)

    def clear_queries(self):
        with self.lock:
            self.queries.clear()

    # ---- inspection ----------------------------------------------------------------
    def count(self, transport=None, name=None):
        with self.lock:
            qs = list(self.queries)
        if transport:
            qs = [q for q in qs if q["transport"] == transport]
        if name is not None:
            want = dns.name.from_text(name).to_text().lower()
            qs = [q for q in qs if q["name"] == want]
        return len(qs)

    @property
    def udp_count(self):
        return self.count("udp")

    @property
    def tcp_count(self):
        return self.count("tcp")

    # ---- lifecycle -----------------------------------------------------------------
    def start(self):
        for target in (self._udp_loop, self._tcp_loop):
            t = threading.Thread(target=target, daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def stop(self):
        self._stop.set()
        for t in list(self._timers):
            t.cancel()
        for t in self._threads:
            t.join(timeout=3)
        for c in list(self._tcp_conns):
            try:
                c.close()
            except OSError:
                pass
        for s in (self.udp, self.tcp, self.forge_sock):
            try:
                s.close()
            except OSError:
                pass

    # ---- answering -----------------------------------------------------------------
    def _soa(self):
        return dns.rrset.from_text(
            FAKE_ZONE, self.soa_ttl, "IN", "SOA",
            f"ns1.{FAKE_ZONE} hostmaster.{FAKE_ZONE} 1 3600 900 604800 {self.soa_minimum}")

    def _lookup(self, qname, rdtype):
        """Return (rcode, answer rrsets, authority rrsets)."""
        key_name = qname.to_text().lower()
        with self.lock:
            gen = self.generator
            exact = self.records.get((key_name, rdtype))
            cname = self.records.get((key_name, dns.rdatatype.CNAME))
            exists = any(k[0] == key_name for k in self.records)
        if gen is not None:
            got = gen(qname, rdtype)
            if got is not None:
                return dns.rcode.NOERROR, got, []
        if exact:
            return dns.rcode.NOERROR, [r.copy() for r in exact], []
        if cname and rdtype != dns.rdatatype.CNAME:
            answers = [r.copy() for r in cname]
            target = cname[0][0].target
            rc, more, auth = self._lookup(target, rdtype)
            return rc, answers + more, auth
        if exists:
            return dns.rcode.NOERROR, [], [self._soa()]
        return dns.rcode.NXDOMAIN, [], [self._soa()]

    def _response(self, query):
        resp = dns.message.make_response(query, our_payload=1232)
        resp.flags |= dns.flags.AA
        mode = self.mode
        if self.formerr_on_cookie and self.cookie_of(query) is not None:
            resp.use_edns(False)
            resp.set_rcode(dns.rcode.FORMERR)
            return resp
        if mode == "servfail":
            resp.set_rcode(dns.rcode.SERVFAIL)
            if self.ede is not None and query.edns >= 0:
                resp.use_edns(0, payload=1232, options=[dns.edns.EDEOption(self.ede)])
            return resp
        if mode == "refused":
            resp.set_rcode(dns.rcode.REFUSED)
            return resp
        if not query.question:
            resp.set_rcode(dns.rcode.FORMERR)
            return resp
        q = query.question[0]
        rc, answers, auth = self._lookup(q.name, q.rdtype)
        resp.set_rcode(rc)
        for rr in answers:
            # Owner names in the answer keep the case the table was written in; the
            # question keeps the case of the query (make_response copies it).
            resp.answer.append(rr)
        for rr in auth:
            resp.authority.append(rr)
        return resp

    @staticmethod
    def _udp_limit(query):
        if query.edns >= 0:
            return max(512, query.payload)
        return 512

    def _truncated(self, query):
        resp = dns.message.make_response(query, our_payload=1232)
        resp.flags |= dns.flags.AA | dns.flags.TC
        return resp.to_wire()

    @staticmethod
    def cookie_of(msg):
        """The data of a message's COOKIE option (code 10), or None."""
        for o in msg.options:
            if o.otype == 10:
                return o.to_wire() if not hasattr(o, "data") else o.data
        return None

    def server_cookie(self, client):
        # RFC 9018 §4.2's layout: version 1, three reserved bytes, a timestamp, a hash.
        head = bytes([1, 0, 0, 0]) + struct.pack("!I", self.cookie_time)
        return head + hashlib.sha256(self.cookie_secret + client + head).digest()[:8]

    def _cookie_reply(self, query):
        """(COOKIE option data for the answer or None, whether to answer BADCOOKIE)."""
        data = self.cookie_of(query) if self.cookies else None
        if data is None or len(data) < 8:
            return None, False
        client = bytes(data[:8])
        fresh = self.server_cookie(client)
        return client + fresh, self.cookie_require and bytes(data[8:]) != fresh

    def _udp_wire(self, query):
        cookie, bad = self._cookie_reply(query)
        if bad:
            resp = dns.message.make_response(query, our_payload=1232)
            resp.use_edns(0, payload=1232, options=[dns.edns.GenericOption(10, cookie)])
            resp.set_rcode(dns.rcode.BADCOOKIE)
            return resp.to_wire()
        if self.mode == "tc":
            return self._truncated(query)
        resp = self._response(query)
        if cookie is not None:
            rcode = resp.rcode()
            resp.use_edns(0, payload=1232,
                          options=list(resp.options) + [dns.edns.GenericOption(10, cookie)])
            resp.set_rcode(rcode)
        try:
            return resp.to_wire(max_size=self._udp_limit(query))
        except dns.exception.TooBig:
            return self._truncated(query)

    def _forgeries(self, query):
        """Yield (socket, wire) for each forgery configured."""
        q = query.question[0]
        for kind in self.forge:
            if kind == "wrong_id":
                f = dns.message.make_response(query, our_payload=1232)
                f.id = (query.id + 0x5A5A) & 0xFFFF
                f.answer.append(dns.rrset.from_text(q.name, 300, "IN", "A", FORGED_A))
                yield self.udp, f.to_wire()
            elif kind in ("wrong_question", "wrong_qtype"):
                if kind == "wrong_question":
                    if len(q.name.labels) > 1:
                        other = dns.name.from_text("evil-" + q.name.labels[0].decode("ascii", "replace"),
                                                   origin=q.name.parent())
                    else:
                        other = dns.name.from_text("evil." + FAKE_ZONE)
                    fq = dns.message.make_query(other, q.rdtype)
                else:
                    other_type = dns.rdatatype.AAAA if q.rdtype != dns.rdatatype.AAAA else dns.rdatatype.A
                    fq = dns.message.make_query(q.name, other_type)
                fq.id = query.id
                if query.edns >= 0:
                    fq.use_edns(0, 0, 1232)
                f = dns.message.make_response(fq, our_payload=1232)
                f.answer.append(dns.rrset.from_text(q.name, 300, "IN", "A", FORGED_A))
                yield self.udp, f.to_wire()
            elif kind in ("wrong_cookie", "no_cookie"):
                f = dns.message.make_response(query, our_payload=1232)
                f.answer.append(dns.rrset.from_text(q.name, 300, "IN", "A", FORGED_A))
                data = self.cookie_of(query)
                if kind == "wrong_cookie" and data is not None and len(data) >= 8:
                    wrong = bytes(b ^ 0x5A for b in data[:8])
                    f.use_edns(0, payload=1232,
                               options=[dns.edns.GenericOption(10, wrong + self.server_cookie(wrong))])
                yield self.udp, f.to_wire()
            elif kind == "wrong_source":
                f = dns.message.make_response(query, our_payload=1232)
                f.answer.append(dns.rrset.from_text(q.name, 300, "IN", "A", FORGED_A))
                yield self.forge_sock, f.to_wire()
            else:
                raise ValueError(f"unknown forgery {kind}")

    def _delay_for(self, query):
        if query.question:
            name = query.question[0].name.to_text().lower()
            with self.lock:
                if name in self.delays:
                    return self.delays[name]
        return self.delay_ms

    def _record(self, transport, query, src):
        q = query.question[0] if query.question else None
        with self.lock:
            self.queries.append({
                "transport": transport,
                "name": q.name.to_text().lower() if q is not None else None,
                "raw_name": q.name.to_text() if q is not None else None,
                "rdtype": q.rdtype if q is not None else None,
                "id": query.id,
                "source": src,
                "edns": query.edns,
                "payload": query.payload,
                "cookie": self.cookie_of(query),
                "time": time.monotonic(),
            })

    def _later(self, seconds, fn):
        if self._stop.is_set():
            return
        if seconds <= 0:
            fn()
            return
        t = threading.Timer(seconds, fn)
        t.daemon = True
        self._timers.append(t)
        t.start()

    def _send_udp(self, sock, wire, addr):
        if self._stop.is_set():
            return
        try:
            sock.sendto(wire, addr)
        except OSError as e:
            self.errors.append(repr(e))

    def _handle_udp(self, data, addr):
        try:
            query = dns.message.from_wire(data)
        except Exception as e:  # malformed: ignore, as a real server might
            self.errors.append(f"udp parse: {e!r}")
            return
        self._record("udp", query, addr)
        if self.mode == "drop" or self._udp_lost(query):
            return
        delay = self._delay_for(query) / 1000.0
        forgeries = list(self._forgeries(query)) if (self.forge and query.question) else []
        real = None if (self.forge_only and forgeries) else self._udp_wire(query)

        def send_all():
            for sock, wire in forgeries:
                self._send_udp(sock, wire, addr)
                with self.lock:
                    self.forged_sent += 1
            if real is not None:
                if forgeries:
                    self._later(self.forge_gap_ms / 1000.0, lambda: self._send_udp(self.udp, real, addr))
                else:
                    self._send_udp(self.udp, real, addr)

        self._later(delay, send_all)

    def _udp_lost(self, query):
        """Whether the loss settings drop this UDP query (as lost on the way here)."""
        key = (query.question[0].name.to_text().lower(), query.question[0].rdtype) \
            if query.question else None
        with self.lock:
            seen = self._udp_seen.get(key, 0)
            self._udp_seen[key] = seen + 1
            if seen < self.udp_drop_first:
                return True
            return self.udp_loss > 0 and self.rng.random() < self.udp_loss

    def _udp_loop(self):
        while not self._stop.is_set():
            try:
                data, addr = self.udp.recvfrom(65535)
            except socket.timeout:
                continue
            except OSError:
                if self._stop.is_set():
                    return
                continue
            try:
                self._handle_udp(data, addr)
            except Exception as e:  # keep serving; the test sees `errors`
                self.errors.append(f"udp handler: {e!r}")

    def _tcp_loop(self):
        while not self._stop.is_set():
            try:
                conn, addr = self.tcp.accept()
            except socket.timeout:
                continue
            except OSError:
                if self._stop.is_set():
                    return
                continue
            self._tcp_conns.append(conn)
            t = threading.Thread(target=self._tcp_conn, args=(conn, addr), daemon=True)
            t.start()

    def _tcp_conn(self, conn, addr):
        conn.settimeout(0.2)
        try:
            while not self._stop.is_set():
                deadline = time.monotonic() + 30
                try:
                    (length,) = struct.unpack("!H", _recv_exact(conn, 2, deadline))
                    data = _recv_exact(conn, length, deadline)
                except (TimeoutError, ConnectionError, OSError):
                    return
                try:
                    query = dns.message.from_wire(data)
                except Exception as e:
                    self.errors.append(f"tcp parse: {e!r}")
                    return
                self._record("tcp", query, addr)
                if self.mode == "drop":
                    continue
                delay_ms = self._delay_for(query)
                if delay_ms:
                    end = time.monotonic() + delay_ms / 1000.0
                    while time.monotonic() < end and not self._stop.is_set():
                        time.sleep(0.01)
                # Over TCP the whole message fits (dnspython would cap it at the EDNS size).
                wire = self._response(query).to_wire(max_size=65535)
                try:
                    conn.sendall(struct.pack("!H", len(wire)) + wire)
                except OSError:
                    return
        finally:
            try:
                conn.close()
            except OSError:
                pass
