// SPDX-License-Identifier: BSD-3-Clause
// Resource records (RFC 1035 §4.1.3) as views into a message: where the owner, the fixed
// fields and the rdata sit. Pure functions; nothing is copied.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "dns/name.h"
#include "dns/wire.h"

namespace nscache::dns {

struct RecordView {
    size_t owner_offset = 0;
    size_t ttl_offset = 0;  // the 32-bit TTL field
    size_t rdata_offset = 0;
    size_t end = 0;  // offset just after the rdata
    uint16_t type = 0;
    uint16_t rclass = 0;
    uint32_t ttl = 0;
    uint16_t rdlength = 0;
};

// Reads the record at `offset`. nullopt when the owner name is malformed (see skip_name for
// `frozen`) or the fixed fields or rdata run past the message.
std::optional<RecordView> read_record(Bytes msg, size_t offset, FrozenFields frozen = {});

// Checks the names inside the rdata of types whose rdata holds compressible names (RFC 1035
// types NS, CNAME, PTR, DNAME, MX, SOA) and that the rdata is exactly as long as those names
// and fields say. Other types' rdata is opaque (RFC 3597) and always passes.
bool rdata_is_well_formed(Bytes msg, const RecordView& rr, FrozenFields frozen = {});

// The MINIMUM field of an SOA record's rdata (RFC 2308 §4), or nullopt if malformed.
std::optional<uint32_t> soa_minimum(Bytes msg, const RecordView& soa);

}  // namespace nscache::dns
