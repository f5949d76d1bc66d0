// SPDX-License-Identifier: BSD-3-Clause
#include "dns/padding.h"

#include <algorithm>
#include <cstring>

#include "dns/record.h"

namespace nscache::dns {

bool options_have_padding(Bytes options) {
    size_t at = 0;
    while (at + 4 <= options.size()) {
        const uint16_t code = read_u16(&options[at]);
        const size_t length = read_u16(&options[at + 2]);
        if (at + 4 + length > options.size()) return false;
        if (code == kOptionPadding) return true;
        at += 4 + length;
    }
    return false;
}

size_t pad_response(std::span<uint8_t> buffer, size_t length) {
    if (length < kHeaderSize || length > buffer.size()) return length;
    const Bytes msg(buffer.data(), length);
    const Header h = read_header(msg);
    size_t offset = kHeaderSize;
    for (uint16_t i = 0; i < h.qdcount; ++i) {
        auto name = skip_name(msg, offset);
        if (!name || name->end + 4 > length) return length;
        offset = name->end + 4;
    }
    const size_t records = size_t{h.ancount} + h.nscount + h.arcount;
    std::optional<RecordView> opt;
    for (size_t i = 0; i < records; ++i) {
        auto rr = read_record(msg, offset);
        if (!rr) return length;
        // The OPT is in the additional section (RFC 6891 §6.1.1).
        if (rr->type == rtype::OPT && i >= size_t{h.ancount} + h.nscount) opt = rr;
        offset = rr->end;
    }
    if (!opt) return length;
    const size_t capacity = std::min<size_t>(buffer.size(), 65535);
    if (length + 4 > capacity || opt->rdlength + 4 > 65535) return length;
    const size_t unpadded = length + 4;
    size_t pad = (kResponsePaddingBlock - unpadded % kResponsePaddingBlock) % kResponsePaddingBlock;
    pad = std::min({pad, capacity - unpadded, size_t{65535} - 4 - opt->rdlength});
    uint8_t* at = buffer.data() + opt->end;
    std::memmove(at + 4 + pad, at, length - opt->end);  // records after the OPT, if any
    write_u16(at, kOptionPadding);
    write_u16(at + 2, static_cast<uint16_t>(pad));
    std::memset(at + 4, 0, pad);
    write_u16(buffer.data() + opt->rdata_offset - 2,
              static_cast<uint16_t>(opt->rdlength + 4 + pad));
    return unpadded + pad;
}

}  // namespace nscache::dns
