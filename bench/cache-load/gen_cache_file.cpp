// SPDX-License-Identifier: BSD-3-Clause
// Writes an nscache cache file (format version 2, src/cache/cache_file.cpp) with N distinct
// entries, without the daemon's code: the benchmark's input comes from the format as written
// down, not from the code it measures. The mix is a host cache's: per name an A answer (one
// or two addresses), every fourth name an AAAA, every tenth an NXDOMAIN with its SOA, every
// twentieth a CNAME to an A. All entries are born `age` seconds before now with TTL 3600.
//
//   gen_cache_file N PATH [age_s]
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

std::vector<uint8_t> out;
uint64_t checksum = 0xcbf29ce484222325ull;

void u8(uint8_t v) {
    out.push_back(v);
}
void u16(uint16_t v) {
    u8(static_cast<uint8_t>(v >> 8));
    u8(static_cast<uint8_t>(v));
}
void u32(uint32_t v) {
    u16(static_cast<uint16_t>(v >> 16));
    u16(static_cast<uint16_t>(v));
}
void u64(uint64_t v) {
    u32(static_cast<uint32_t>(v >> 32));
    u32(static_cast<uint32_t>(v));
}
void raw(const std::vector<uint8_t>& b) {
    out.insert(out.end(), b.begin(), b.end());
}

std::vector<uint8_t> wire_name(const std::string& text) {
    std::vector<uint8_t> w;
    size_t start = 0;
    while (start < text.size()) {
        size_t dot = text.find('.', start);
        if (dot == std::string::npos) dot = text.size();
        w.push_back(static_cast<uint8_t>(dot - start));
        w.insert(w.end(), text.begin() + static_cast<long>(start),
                 text.begin() + static_cast<long>(dot));
        start = dot + 1;
    }
    w.push_back(0);
    return w;
}

struct Rec {
    std::vector<uint8_t> bytes;
    std::vector<uint16_t> ttl_offsets;
    uint16_t count = 0;
};

// One record owned by `owner` (wire bytes, maybe a pointer), its TTL's offset noted.
void add_rr(Rec& r, const std::vector<uint8_t>& owner, uint16_t type, uint32_t ttl,
            const std::vector<uint8_t>& rdata) {
    r.bytes.insert(r.bytes.end(), owner.begin(), owner.end());
    auto put16 = [&](uint16_t v) {
        r.bytes.push_back(static_cast<uint8_t>(v >> 8));
        r.bytes.push_back(static_cast<uint8_t>(v));
    };
    put16(type);
    put16(1);
    r.ttl_offsets.push_back(static_cast<uint16_t>(r.bytes.size()));
    put16(static_cast<uint16_t>(ttl >> 16));
    put16(static_cast<uint16_t>(ttl));
    put16(static_cast<uint16_t>(rdata.size()));
    r.bytes.insert(r.bytes.end(), rdata.begin(), rdata.end());
    ++r.count;
}

void entry(const std::vector<uint8_t>& name, uint16_t qtype, uint8_t kind, uint8_t rcode,
           uint16_t an, uint16_t ns, const Rec& r, uint32_t ttl, uint64_t born_wall_ms) {
    u8(static_cast<uint8_t>(name.size()));
    raw(name);
    u16(qtype);
    u16(1);
    u8(0);  // key flags
    u8(kind);
    u8(rcode);
    u8(0);  // AD
    u16(an);
    u16(ns);
    u16(0);
    u32(ttl);
    u64(born_wall_ms);
    u16(static_cast<uint16_t>(r.bytes.size()));
    raw(r.bytes);
    u16(static_cast<uint16_t>(r.ttl_offsets.size()));
    for (uint16_t off : r.ttl_offsets) u16(off);
    u8(0);  // no EDE
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: %s N PATH [age_s]\n", argv[0]);
        return 2;
    }
    const uint64_t n = std::strtoull(argv[1], nullptr, 10);
    const char* path = argv[2];
    const uint64_t age_s = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 60;
    const uint64_t wall_ms =
        static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count());
    const uint64_t born = wall_ms - age_s * 1000;
    const uint32_t ttl = 3600;
    const std::vector<uint8_t> question_ptr = {0xc0, 0x0c};
    const std::vector<uint8_t> zone = wire_name("bench.test");

    FILE* f = std::fopen(path, "wb");
    if (f == nullptr) {
        std::perror(path);
        return 1;
    }
    auto flush = [&] {
        for (uint8_t b : out) {
            checksum ^= b;
            checksum *= 0x100000001b3ull;
        }
        std::fwrite(out.data(), 1, out.size(), f);
        out.clear();
    };
    const char magic[8] = {'N', 'S', 'C', 'A', 'C', 'H', 'E', '\0'};
    out.insert(out.end(), magic, magic + 8);
    u32(2);
    u32(0);
    uint64_t written = 0;
    for (uint64_t i = 0; written < n; ++i) {
        const std::string host =
            "host" + std::to_string(i) + ".zone" + std::to_string(i % 97) + ".bench.test";
        const std::vector<uint8_t> name = wire_name(host);
        const auto ip = static_cast<uint32_t>(0x0a000000u + i);
        const std::vector<uint8_t> a1 = {static_cast<uint8_t>(ip >> 24),
                                         static_cast<uint8_t>(ip >> 16),
                                         static_cast<uint8_t>(ip >> 8), static_cast<uint8_t>(ip)};
        if (i % 10 == 9) {
            // NXDOMAIN, SOA of bench.test in the authority section.
            Rec r;
            std::vector<uint8_t> soa = wire_name("ns.bench.test");
            const std::vector<uint8_t> admin = wire_name("admin.bench.test");
            soa.insert(soa.end(), admin.begin(), admin.end());
            for (uint32_t v : {2024010101u, 3600u, 600u, 86400u, 3600u}) {
                for (int s = 24; s >= 0; s -= 8) soa.push_back(static_cast<uint8_t>(v >> s));
            }
            add_rr(r, zone, 6, ttl, soa);
            entry(name, 1, 1, 3, 0, 1, r, ttl, born);
        } else if (i % 20 == 4) {
            // A CNAME to an A in the same answer.
            Rec r;
            const std::vector<uint8_t> target =
                wire_name("t" + std::to_string(i) + ".cdn.bench.test");
            add_rr(r, question_ptr, 5, ttl, target);
            add_rr(r, target, 1, ttl, a1);
            entry(name, 1, 0, 0, 2, 0, r, ttl, born);
        } else {
            Rec r;
            add_rr(r, question_ptr, 1, ttl, a1);
            if (i % 3 == 0)
                add_rr(r, question_ptr, 1, ttl,
                       {a1[0], a1[1], a1[2], static_cast<uint8_t>(a1[3] ^ 1)});
            entry(name, 1, 0, 0, r.count, 0, r, ttl, born);
        }
        ++written;
        if (i % 4 == 1 && written < n) {
            Rec r;
            std::vector<uint8_t> v6(16, 0);
            v6[0] = 0x20;
            v6[1] = 0x01;
            v6[2] = 0x0d;
            v6[3] = 0xb8;
            for (int b = 0; b < 4; ++b) v6[12 + b] = a1[b];
            add_rr(r, question_ptr, 28, ttl, v6);
            entry(name, 28, 0, 0, 1, 0, r, ttl, born);
            ++written;
        }
        if (out.size() > (1u << 20)) flush();
    }
    flush();
    const char trailer[4] = {'E', 'N', 'D', '\0'};
    out.insert(out.end(), trailer, trailer + 4);
    u64(written);
    u64(checksum);
    std::fwrite(out.data(), 1, out.size(), f);
    if (std::fclose(f) != 0) {
        std::perror(path);
        return 1;
    }
    return 0;
}
