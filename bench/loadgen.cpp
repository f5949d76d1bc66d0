// SPDX-License-Identifier: BSD-3-Clause
// loadgen: a paced DNS load generator that reports latency and losses per second.
//
// It sends UDP queries at a fixed rate (query k is due at start + k/rate, whether or not
// earlier ones were answered: no coordinated omission), from one or more name lists, over a
// few sockets, and matches each answer to its query by socket (source port) and ID, checking
// that the answer's question is the one asked. Latency is the time from just before sendto()
// to the kernel's receive timestamp (SO_TIMESTAMPNS) of the answer. A query not answered
// within --timeout-ms counts as lost; an answer that comes later is counted as late.
//
//   loadgen --server 127.0.0.1:PORT --names FILE[:WEIGHT] [--names FILE[:WEIGHT]]...
//           --rate QPS --duration SECONDS [--count N] [--order random|seq]
//           [--timeout-ms 1000] [--sockets 4] [--seed 1] [--csv FILE] [--zipf S]
//
// Name files use dnsperf's format: "NAME [TYPE]" per line (TYPE defaults to A; A, AAAA,
// MX, TXT, NS, CNAME, SOA, PTR, SRV, ANY or TYPEnnn). With several files each query picks a
// file at random in proportion to the weights (default 1), then a name in it: at random
// (--order random) or the file's next name in order (--order seq, wrapping).
// --zipf S (S > 0, with --order random) picks the name by a Zipf law instead of uniformly:
// the name on line k of its file (k = 1, 2, ...) has probability proportional to 1 / k^S.
//
// Output: CSV on stdout (or --csv FILE), one row per second of sending, attributed to the
// second the query was sent in, emitted once every query of that second is answered or lost:
//   second,sent,answered,lost,p50_us,p99_us,p999_us,max_us,servfail,other_rcode
// and a final line on stderr:
//   summary start_epoch_ns=... sent=... answered=... lost=... late=... mismatched=...
//           servfail=... other_rcode=... p50_us=... p99_us=... p999_us=... max_us=...
//           send_lag_max_us=...
// Sending stops after --duration seconds or --count queries, whichever comes first; then it
// waits at most --timeout-ms for the last answers. Exit 0, or 2 on a bad argument.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

volatile std::sig_atomic_t g_stop = 0;
void on_signal(int) {
    g_stop = 1;
}

constexpr std::int64_t kNs = 1'000'000'000;
constexpr std::size_t kRecvBatch = 64;
constexpr std::size_t kMaxAnswer = 4096;
constexpr std::uint64_t kMaxSendBurst = 256;  // queries sent per loop turn at most

std::int64_t now_ns() {
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);  // the clock SO_TIMESTAMPNS uses
    return static_cast<std::int64_t>(ts.tv_sec) * kNs + ts.tv_nsec;
}

[[noreturn]] void usage(const char* msg) {
    std::fprintf(stderr,
                 "error: %s\n"
                 "usage: loadgen --server ADDR:PORT --names FILE[:WEIGHT]... --rate QPS "
                 "--duration SECONDS [--count N] [--order random|seq] [--timeout-ms MS] "
                 "[--sockets N] [--seed N] [--csv FILE] [--zipf S]\n",
                 msg);
    std::exit(2);
}

int qtype_code(const std::string& t) {
    static const std::pair<const char*, int> known[] = {
        {"A", 1},   {"NS", 2},   {"CNAME", 5}, {"SOA", 6},  {"PTR", 12},
        {"MX", 15}, {"TXT", 16}, {"AAAA", 28}, {"SRV", 33}, {"ANY", 255}};
    std::string u;
    for (char c : t) u += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    for (auto& [name, code] : known)
        if (u == name) return code;
    if (u.rfind("TYPE", 0) == 0 && u.size() > 4) {
        int v = std::atoi(u.c_str() + 4);
        if (v > 0 && v < 65536) return v;
    }
    return -1;
}

// The encoded queries of one name file, stored back to back.
struct NameSet {
    std::string path;
    double weight = 1.0;
    std::vector<std::uint8_t> wire;     // all queries, ID bytes zero
    std::vector<std::uint32_t> offset;  // start of query i in wire
    std::vector<std::uint16_t> length;  // length of query i
    std::uint64_t cursor = 0;           // next name for --order seq
    std::vector<double> zipf_cdf;       // --zipf: cumulative probability of names 0..i

    std::size_t size() const { return offset.size(); }

    bool add(const std::string& name, int qtype) {
        std::vector<std::uint8_t> q(12, 0);
        q[2] = 0x01;  // RD
        q[5] = 1;     // QDCOUNT
        std::size_t start = 0;
        std::string n = name;
        if (!n.empty() && n.back() == '.') n.pop_back();
        if (n.size() > 253) return false;
        if (!n.empty()) {
            while (start <= n.size()) {
                std::size_t dot = n.find('.', start);
                if (dot == std::string::npos) dot = n.size();
                std::size_t len = dot - start;
                if (len == 0 || len > 63) return false;
                q.push_back(static_cast<std::uint8_t>(len));
                q.insert(q.end(), n.begin() + static_cast<long>(start),
                         n.begin() + static_cast<long>(dot));
                start = dot + 1;
            }
        }
        q.push_back(0);
        q.push_back(static_cast<std::uint8_t>(qtype >> 8));
        q.push_back(static_cast<std::uint8_t>(qtype & 0xff));
        q.push_back(0);
        q.push_back(1);  // class IN
        offset.push_back(static_cast<std::uint32_t>(wire.size()));
        length.push_back(static_cast<std::uint16_t>(q.size()));
        wire.insert(wire.end(), q.begin(), q.end());
        return true;
    }
};

NameSet load_names(const std::string& spec) {
    NameSet set;
    set.path = spec;
    auto colon = spec.rfind(':');
    if (colon != std::string::npos && colon + 1 < spec.size()) {
        char* end = nullptr;
        double w = std::strtod(spec.c_str() + colon + 1, &end);
        if (*end == '\0' && w > 0) {
            set.weight = w;
            set.path = spec.substr(0, colon);
        }
    }
    std::ifstream in(set.path);
    if (!in) usage(("cannot read names file " + set.path).c_str());
    std::string line;
    std::size_t lineno = 0;
    while (std::getline(in, line) && lineno < 50'000'000) {
        ++lineno;
        std::istringstream ss(line);
        std::string name, type = "A";
        if (!(ss >> name) || name[0] == '#' || name[0] == ';') continue;
        ss >> type;
        int code = qtype_code(type);
        if (code < 0 || !set.add(name, code)) {
            std::fprintf(stderr, "warning: %s:%zu: skipped bad line\n", set.path.c_str(), lineno);
        }
    }
    if (set.size() == 0) usage(("no names in " + set.path).c_str());
    if (set.wire.size() > 0xffffffffu) usage("names file too large");
    return set;
}

struct Slot {
    std::int64_t sent_ns = 0;
    std::uint32_t second = 0;
    std::uint32_t set = 0;
    std::uint32_t index = 0;
    std::uint32_t gen = 0;
    bool outstanding = false;
};

struct InFlight {  // in send order, for timeouts
    std::int64_t sent_ns;
    std::uint32_t sock;
    std::uint16_t id;
    std::uint32_t gen;
};

struct Second {
    std::uint64_t sent = 0, answered = 0, lost = 0, servfail = 0, other_rcode = 0;
    std::vector<std::uint32_t> lat_us;
};

std::uint32_t pct(std::vector<std::uint32_t>& v, double q) {  // v sorted; nearest rank
    if (v.empty()) return 0;
    auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
    if (rank < 1) rank = 1;
    return v[std::min(rank, v.size()) - 1];
}

bool same_question(const std::uint8_t* a, const std::uint8_t* q, std::size_t qlen) {
    // Compare from byte 12 to the end of the question, names case-insensitively.
    for (std::size_t i = 12; i < qlen; ++i) {
        std::uint8_t x = a[i], y = q[i];
        if (x >= 'A' && x <= 'Z') x = static_cast<std::uint8_t>(x + 32);
        if (y >= 'A' && y <= 'Z') y = static_cast<std::uint8_t>(y + 32);
        if (x != y) return false;
    }
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    std::string server;
    std::vector<std::string> name_specs;
    double rate = 0;
    double duration = 0;
    std::uint64_t count = 0;
    bool seq = false;
    std::int64_t timeout_ms = 1000;
    std::size_t n_socks = 4;
    std::uint64_t seed = 1;
    std::string csv_path;
    double zipf_s = 0;

    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto val = [&]() -> std::string {
            if (i + 1 >= argc) usage(("missing value for " + a).c_str());
            return argv[++i];
        };
        if (a == "--server")
            server = val();
        else if (a == "--names")
            name_specs.push_back(val());
        else if (a == "--rate")
            rate = std::atof(val().c_str());
        else if (a == "--duration")
            duration = std::atof(val().c_str());
        else if (a == "--count")
            count = std::strtoull(val().c_str(), nullptr, 10);
        else if (a == "--order") {
            std::string o = val();
            if (o == "seq")
                seq = true;
            else if (o != "random")
                usage("--order is random or seq");
        } else if (a == "--timeout-ms")
            timeout_ms = std::atoll(val().c_str());
        else if (a == "--sockets")
            n_socks = std::strtoul(val().c_str(), nullptr, 10);
        else if (a == "--seed")
            seed = std::strtoull(val().c_str(), nullptr, 10);
        else if (a == "--csv")
            csv_path = val();
        else if (a == "--zipf")
            zipf_s = std::atof(val().c_str());
        else
            usage(("unknown argument " + a).c_str());
    }
    if (server.empty() || name_specs.empty()) usage("--server and --names are required");
    if (!(rate > 0 && rate <= 10'000'000)) usage("--rate must be in (0, 10000000]");
    if (!(duration > 0 && duration <= 86400)) usage("--duration must be in (0, 86400]");
    if (timeout_ms < 1 || timeout_ms > 60000) usage("--timeout-ms must be 1..60000");
    if (n_socks < 1 || n_socks > 64) usage("--sockets must be 1..64");
    if (!(zipf_s >= 0 && zipf_s <= 10)) usage("--zipf must be in (0, 10]");
    if (zipf_s > 0 && seq) usage("--zipf needs --order random");

    sockaddr_in dst{};
    {
        auto colon = server.rfind(':');
        if (colon == std::string::npos) usage("--server is ADDR:PORT");
        dst.sin_family = AF_INET;
        dst.sin_port = htons(static_cast<std::uint16_t>(std::atoi(server.c_str() + colon + 1)));
        if (inet_pton(AF_INET, server.substr(0, colon).c_str(), &dst.sin_addr) != 1)
            usage("--server address must be IPv4");
    }

    std::vector<NameSet> sets;
    double total_weight = 0;
    for (auto& s : name_specs) {
        sets.push_back(load_names(s));
        total_weight += sets.back().weight;
    }
    if (zipf_s > 0) {
        for (auto& set : sets) {
            set.zipf_cdf.resize(set.size());
            double acc = 0;
            for (std::size_t k = 0; k < set.size(); ++k)
                set.zipf_cdf[k] = acc += std::pow(static_cast<double>(k + 1), -zipf_s);
            for (auto& c : set.zipf_cdf) c /= acc;
            set.zipf_cdf.back() = 1.0;
        }
    }
    std::vector<double> cumulative;
    {
        double acc = 0;
        for (auto& s : sets) cumulative.push_back(acc += s.weight / total_weight);
        cumulative.back() = 1.0;
    }

    std::FILE* csv = stdout;
    if (!csv_path.empty()) {
        csv = std::fopen(csv_path.c_str(), "w");
        if (!csv) usage(("cannot write " + csv_path).c_str());
    }

    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);

    std::vector<int> socks;
    std::vector<pollfd> pfds;
    for (std::size_t i = 0; i < n_socks; ++i) {
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            std::perror("socket");
            return 1;
        }
        int one = 1, buf = 4 << 20;
        setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
        if (connect(fd, reinterpret_cast<sockaddr*>(&dst), sizeof dst) != 0) {
            std::perror("connect");
            return 1;
        }
        socks.push_back(fd);
        pfds.push_back({fd, POLLIN, 0});
    }

    std::vector<std::vector<Slot>> slots(n_socks, std::vector<Slot>(65536));
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    std::vector<std::uint16_t> next_id(n_socks);
    for (auto& id : next_id) id = static_cast<std::uint16_t>(rng());

    const auto n_seconds = static_cast<std::size_t>(std::ceil(duration)) + 1;
    std::vector<Second> secs(n_seconds);
    std::vector<std::uint32_t> all_lat;
    std::deque<InFlight> inflight;
    std::uint64_t sent = 0, answered = 0, lost = 0, late = 0, mismatched = 0;
    std::uint64_t servfail = 0, other_rcode = 0, send_errors = 0;
    std::int64_t send_lag_max = 0;
    std::uint32_t gen_counter = 0;

    std::fprintf(csv,
                 "second,sent,answered,lost,p50_us,p99_us,p999_us,max_us,servfail,other_rcode\n");
    std::fflush(csv);
    std::size_t next_emit = 0;
    auto emit_second = [&](std::size_t s) {
        Second& b = secs[s];
        std::sort(b.lat_us.begin(), b.lat_us.end());
        std::fprintf(
            csv, "%zu,%llu,%llu,%llu,%u,%u,%u,%u,%llu,%llu\n", s,
            static_cast<unsigned long long>(b.sent), static_cast<unsigned long long>(b.answered),
            static_cast<unsigned long long>(b.lost), pct(b.lat_us, 0.50), pct(b.lat_us, 0.99),
            pct(b.lat_us, 0.999), b.lat_us.empty() ? 0u : b.lat_us.back(),
            static_cast<unsigned long long>(b.servfail),
            static_cast<unsigned long long>(b.other_rcode));
        std::fflush(csv);
        all_lat.insert(all_lat.end(), b.lat_us.begin(), b.lat_us.end());
        std::vector<std::uint32_t>().swap(b.lat_us);
    };

    const std::int64_t timeout_ns = timeout_ms * 1'000'000;
    const std::int64_t start = now_ns() + 20'000'000;  // first query 20 ms from now
    const std::int64_t send_end = start + static_cast<std::int64_t>(duration * 1e9);
    const double interval_ns = 1e9 / rate;
    bool sending = true;
    std::size_t rr_sock = 0;

    // receive buffers
    std::vector<std::uint8_t> rbuf(kRecvBatch * kMaxAnswer);
    std::vector<char> cbuf(kRecvBatch * 64);
    std::vector<iovec> riov(kRecvBatch);
    std::vector<mmsghdr> rmsg(kRecvBatch);

    // The main loop is bounded: sending stops at send_end (or count), draining stops at most
    // timeout + 1 s after that, and a hard deadline guards against clock trouble.
    const std::int64_t hard_deadline = send_end + timeout_ns + 5 * kNs;
    while (true) {
        std::int64_t now = now_ns();
        if (now > hard_deadline) break;
        if (g_stop) sending = false;

        // 1. send what is due
        if (sending) {
            if (now >= send_end || (count && sent >= count)) {
                sending = false;
            } else if (now >= start) {
                auto due =
                    static_cast<std::uint64_t>(static_cast<double>(now - start) / interval_ns) + 1;
                if (count) due = std::min(due, count);
                std::uint64_t burst = 0;
                while (sent < due && burst < kMaxSendBurst) {
                    std::int64_t sched =
                        start + static_cast<std::int64_t>(static_cast<double>(sent) * interval_ns);
                    std::size_t si = 0;
                    if (sets.size() > 1) {
                        double r = unit(rng);
                        while (si + 1 < sets.size() && r > cumulative[si]) ++si;
                    }
                    NameSet& set = sets[si];
                    std::uint64_t idx;
                    if (seq) {
                        idx = set.cursor++ % set.size();
                    } else if (!set.zipf_cdf.empty()) {
                        auto it =
                            std::lower_bound(set.zipf_cdf.begin(), set.zipf_cdf.end(), unit(rng));
                        idx = std::min<std::uint64_t>(
                            static_cast<std::uint64_t>(it - set.zipf_cdf.begin()), set.size() - 1);
                    } else {
                        idx = static_cast<std::uint64_t>(rng() % set.size());
                    }
                    std::size_t sk = rr_sock++ % n_socks;
                    std::uint16_t id = next_id[sk]++;
                    Slot& slot = slots[sk][id];
                    if (slot.outstanding) {  // older than 65536 queries on this socket
                        slot.outstanding = false;
                        ++secs[slot.second].lost;
                        ++lost;
                    }
                    std::uint8_t* q = set.wire.data() + set.offset[idx];
                    q[0] = static_cast<std::uint8_t>(id >> 8);
                    q[1] = static_cast<std::uint8_t>(id & 0xff);
                    auto sec = static_cast<std::uint32_t>(std::min<std::int64_t>(
                        (sched - start) / kNs, static_cast<std::int64_t>(n_seconds - 1)));
                    std::int64_t t_send = now_ns();
                    send_lag_max = std::max(send_lag_max, t_send - sched);
                    ssize_t w = send(socks[sk], q, set.length[idx], 0);
                    ++sent;
                    ++burst;
                    ++secs[sec].sent;
                    if (w < 0) ++send_errors;  // counted as sent; it will time out as lost
                    slot = {t_send,
                            sec,
                            static_cast<std::uint32_t>(si),
                            static_cast<std::uint32_t>(idx),
                            ++gen_counter,
                            true};
                    inflight.push_back({t_send, static_cast<std::uint32_t>(sk), id, gen_counter});
                }
            }
        }

        // 2. receive whatever has arrived
        for (std::size_t sk = 0; sk < n_socks; ++sk) {
            for (int rounds = 0; rounds < 64; ++rounds) {
                for (std::size_t i = 0; i < kRecvBatch; ++i) {
                    riov[i] = {rbuf.data() + i * kMaxAnswer, kMaxAnswer};
                    rmsg[i] = {};
                    rmsg[i].msg_hdr.msg_iov = &riov[i];
                    rmsg[i].msg_hdr.msg_iovlen = 1;
                    rmsg[i].msg_hdr.msg_control = cbuf.data() + i * 64;
                    rmsg[i].msg_hdr.msg_controllen = 64;
                }
                int got = recvmmsg(socks[sk], rmsg.data(), kRecvBatch, MSG_DONTWAIT, nullptr);
                if (got <= 0) break;
                std::int64_t fallback = now_ns();
                for (int i = 0; i < got; ++i) {
                    const std::uint8_t* a = rbuf.data() + static_cast<std::size_t>(i) * kMaxAnswer;
                    std::size_t len = rmsg[i].msg_len;
                    std::int64_t t_recv = fallback;
                    for (cmsghdr* c = CMSG_FIRSTHDR(&rmsg[i].msg_hdr); c;
                         c = CMSG_NXTHDR(&rmsg[i].msg_hdr, c)) {
                        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
                            timespec ts{};
                            std::memcpy(&ts, CMSG_DATA(c), sizeof ts);
                            t_recv = static_cast<std::int64_t>(ts.tv_sec) * kNs + ts.tv_nsec;
                        }
                    }
                    if (len < 12 || !(a[2] & 0x80)) {
                        ++mismatched;
                        continue;
                    }
                    auto id = static_cast<std::uint16_t>((a[0] << 8) | a[1]);
                    Slot& slot = slots[sk][id];
                    if (!slot.outstanding) {
                        ++late;
                        continue;
                    }
                    const NameSet& set = sets[slot.set];
                    std::size_t qlen = set.length[slot.index];
                    if (len < qlen ||
                        !same_question(a, set.wire.data() + set.offset[slot.index], qlen)) {
                        ++mismatched;
                        continue;
                    }
                    slot.outstanding = false;
                    Second& b = secs[slot.second];
                    ++b.answered;
                    ++answered;
                    int rcode = a[3] & 0x0f;
                    if (rcode == 2) {
                        ++b.servfail;
                        ++servfail;
                    } else if (rcode != 0 && rcode != 3) {
                        ++b.other_rcode;
                        ++other_rcode;
                    }
                    std::int64_t lat = std::max<std::int64_t>(0, t_recv - slot.sent_ns) / 1000;
                    b.lat_us.push_back(
                        static_cast<std::uint32_t>(std::min<std::int64_t>(lat, 0xffffffff)));
                }
                if (static_cast<std::size_t>(got) < kRecvBatch) break;
            }
        }

        // 3. time out what waited too long
        now = now_ns();
        while (!inflight.empty() && inflight.front().sent_ns + timeout_ns <= now) {
            InFlight f = inflight.front();
            inflight.pop_front();
            Slot& slot = slots[f.sock][f.id];
            if (slot.outstanding && slot.gen == f.gen) {
                slot.outstanding = false;
                ++secs[slot.second].lost;
                ++lost;
            }
        }
        // the oldest query still in flight bounds which seconds are complete
        while (!inflight.empty()) {
            const InFlight& f = inflight.front();
            const Slot& slot = slots[f.sock][f.id];
            if (slot.outstanding && slot.gen == f.gen) break;
            inflight.pop_front();
        }

        // 4. emit finished seconds
        std::size_t complete;
        if (!sending && inflight.empty()) {
            complete = n_seconds;
        } else {
            // a second is complete once every query scheduled in it was sent and resolved
            std::int64_t next_sched =
                sending ? start + static_cast<std::int64_t>(static_cast<double>(sent) * interval_ns)
                        : send_end;
            std::int64_t oldest = inflight.empty() ? now : inflight.front().sent_ns;
            std::int64_t horizon = std::min({oldest, next_sched, now});
            complete = horizon <= start ? 0 : static_cast<std::size_t>((horizon - start) / kNs);
            complete = std::min(complete, n_seconds);
        }
        while (next_emit < complete) {
            if (secs[next_emit].sent > 0) emit_second(next_emit);
            ++next_emit;
        }
        if (!sending && inflight.empty()) break;

        // 5. wait for answers or the next send
        std::int64_t wait = 1'000'000;  // 1 ms at most
        if (sending) {
            auto next_sched =
                start + static_cast<std::int64_t>(static_cast<double>(sent) * interval_ns);
            wait = std::min(wait, std::max<std::int64_t>(0, next_sched - now_ns()));
        }
        if (wait > 0) {
            timespec ts{0, static_cast<long>(wait)};
            ppoll(pfds.data(), pfds.size(), &ts, nullptr);
        }
    }
    while (next_emit < n_seconds) {
        if (secs[next_emit].sent > 0) emit_second(next_emit);
        ++next_emit;
    }
    std::sort(all_lat.begin(), all_lat.end());
    std::fprintf(
        stderr,
        "summary start_epoch_ns=%lld rate=%.0f sent=%llu answered=%llu lost=%llu late=%llu "
        "mismatched=%llu servfail=%llu other_rcode=%llu send_errors=%llu p50_us=%u p99_us=%u "
        "p999_us=%u max_us=%u send_lag_max_us=%lld\n",
        static_cast<long long>(start), rate, static_cast<unsigned long long>(sent),
        static_cast<unsigned long long>(answered), static_cast<unsigned long long>(lost),
        static_cast<unsigned long long>(late), static_cast<unsigned long long>(mismatched),
        static_cast<unsigned long long>(servfail), static_cast<unsigned long long>(other_rcode),
        static_cast<unsigned long long>(send_errors), pct(all_lat, 0.50), pct(all_lat, 0.99),
        pct(all_lat, 0.999), all_lat.empty() ? 0u : all_lat.back(),
        static_cast<long long>(send_lag_max / 1000));
    if (csv != stdout) std::fclose(csv);
    for (int fd : socks) close(fd);
    return 0;
}
