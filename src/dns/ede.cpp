// SPDX-License-Identifier: BSD-3-Clause
#include "dns/ede.h"

namespace nscache::dns {

bool copy_ede_options(Bytes opt_rdata, std::vector<uint8_t>& out) {
    size_t pos = 0;
    while (pos < opt_rdata.size()) {
        if (opt_rdata.size() - pos < 4) return false;
        const uint16_t code = read_u16(&opt_rdata[pos]);
        const size_t length = read_u16(&opt_rdata[pos + 2]);
        if (opt_rdata.size() - pos - 4 < length) return false;
        if (code == kEdeOptionCode) {
            if (length < 2) return false;
            out.insert(out.end(), opt_rdata.begin() + static_cast<ptrdiff_t>(pos),
                       opt_rdata.begin() + static_cast<ptrdiff_t>(pos + 4 + length));
        }
        pos += 4 + length;
    }
    return true;
}

}  // namespace nscache::dns
