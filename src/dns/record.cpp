// SPDX-License-Identifier: BSD-3-Clause
#include "dns/record.h"

#include "dns/name.h"

namespace nscache::dns {
namespace {

constexpr size_t kFixedFieldsSize = 10;  // type, class, TTL, rdlength

// Skips `count` names at the start of rdata, then requires exactly `fixed_tail` more bytes.
bool names_then_fixed(Bytes msg, const RecordView& rr, int count, size_t fixed_tail,
                      FrozenFields frozen = {}) {
    size_t pos = rr.rdata_offset;
    const Bytes bounded = msg.first(rr.end);
    for (int i = 0; i < count; ++i) {
        auto name = skip_name(bounded, pos, frozen);
        if (!name) return false;
        pos = name->end;
    }
    return pos + fixed_tail == rr.end;
}

}  // namespace

std::optional<RecordView> read_record(Bytes msg, size_t offset, FrozenFields frozen) {
    auto owner = skip_name(msg, offset, frozen);
    if (!owner) return std::nullopt;
    const size_t fixed = owner->end;
    if (fixed + kFixedFieldsSize > msg.size()) return std::nullopt;
    RecordView rr;
    rr.owner_offset = offset;
    rr.type = read_u16(&msg[fixed]);
    rr.rclass = read_u16(&msg[fixed + 2]);
    rr.ttl_offset = fixed + 4;
    rr.ttl = read_u32(&msg[fixed + 4]);
    rr.rdlength = read_u16(&msg[fixed + 8]);
    rr.rdata_offset = fixed + kFixedFieldsSize;
    rr.end = rr.rdata_offset + rr.rdlength;
    if (rr.end > msg.size()) return std::nullopt;
    return rr;
}

bool rdata_is_well_formed(Bytes msg, const RecordView& rr, FrozenFields frozen) {
    switch (rr.type) {
        case rtype::NS:
        case rtype::CNAME:
        case rtype::PTR:
        case rtype::DNAME:
            return names_then_fixed(msg, rr, 1, 0, frozen);
        case rtype::MX:
            if (rr.rdlength < 3) return false;
            {
                RecordView after_pref = rr;
                after_pref.rdata_offset += 2;
                return names_then_fixed(msg, after_pref, 1, 0, frozen);
            }
        case rtype::SOA:
            return names_then_fixed(msg, rr, 2, 20, frozen);
        default:
            return true;
    }
}

std::optional<uint32_t> soa_minimum(Bytes msg, const RecordView& soa) {
    if (soa.type != rtype::SOA || !names_then_fixed(msg, soa, 2, 20)) return std::nullopt;
    return read_u32(&msg[soa.end - 4]);
}

}  // namespace nscache::dns
