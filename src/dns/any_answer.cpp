#include "dns/any_answer.h"

#include <cstring>

namespace nscache::dns {
namespace {

constexpr uint16_t kClassAny = 255;
constexpr uint8_t kHinfoRdata[kAnyAnswerRdataSize] = {7, 'R', 'F', 'C', '8', '4', '8', '2', 0};

}  // namespace

size_t write_any_answer(const Query& q, uint16_t server_udp_size, std::span<uint8_t> out) {
    uint8_t* p = out.data();
    Header h;
    h.id = q.header.id;
    h.flags = static_cast<uint16_t>(flag::QR | flag::RA | (q.header.flags & (flag::RD | flag::CD)));
    h.qdcount = 1;
    h.ancount = 1;
    h.arcount = q.edns.present ? 1 : 0;
    write_header(p, h);
    size_t n = kHeaderSize;
    std::memcpy(p + n, q.question.data(), q.question.size());
    n += q.question.size();

    write_u16(p + n, 0xC000 | kHeaderSize);  // owner: the question's name
    write_u16(p + n + 2, rtype::HINFO);
    write_u16(p + n + 4, q.qclass == kClassAny ? kClassIN : q.qclass);
    write_u32(p + n + 6, kAnyAnswerTtl);
    write_u16(p + n + 10, kAnyAnswerRdataSize);
    std::memcpy(p + n + 12, kHinfoRdata, kAnyAnswerRdataSize);
    n += 12 + kAnyAnswerRdataSize;

    if (q.edns.present) {
        write_opt_record(p + n, server_udp_size, q.edns.do_bit, 0);
        n += kOptRecordSize;
    }
    return n;
}

}  // namespace nscache::dns
