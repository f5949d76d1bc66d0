// SPDX-License-Identifier: BSD-3-Clause
#include "nscd/host_records.h"

#include <cstring>
#include <string>

#include "common/bytes.h"

namespace nscache::nscd {
namespace {

constexpr int32_t kAfInet = 2;
constexpr int32_t kAfInet6 = 10;

void append(std::vector<uint8_t>& out, const void* p, size_t n) {
    const size_t at = out.size();
    out.resize(at + n);
    copy_bytes(out.data() + at, p, n);
}

void append_string(std::vector<uint8_t>& out, const std::string& s) {
    append(out, s.c_str(), s.size() + 1);
}

}  // namespace

std::vector<uint8_t> host_reply(RequestType type, const hostdb::HostAnswer& answer) {
    std::vector<uint8_t> out;
    HostResponseHeader h{};
    h.version = kProtocolVersion;
    if (!answer.found()) {
        h.found = 0;
        h.h_addrtype = -1;
        h.h_length = -1;
        h.error = answer.status == hostdb::HostStatus::NoData ? kNoData : kHostNotFound;
        append(out, &h, sizeof h);
        return out;
    }
    const bool v6 = type == GETHOSTBYNAMEv6 || type == GETHOSTBYADDRv6;
    h.found = 1;
    h.h_name_len = static_cast<int32_t>(answer.canonical.size() + 1);
    h.h_aliases_cnt = static_cast<int32_t>(answer.aliases.size());
    h.h_addrtype = v6 ? kAfInet6 : kAfInet;
    h.h_length = v6 ? 16 : 4;
    h.h_addr_list_cnt = static_cast<int32_t>(v6 ? answer.ipv6.size() : answer.ipv4.size());
    h.error = 0;
    append(out, &h, sizeof h);
    append_string(out, answer.canonical);
    for (const auto& alias : answer.aliases) {
        const auto len = static_cast<uint32_t>(alias.size() + 1);
        append(out, &len, sizeof len);
    }
    if (v6) {
        for (const auto& a : answer.ipv6) append(out, a.data(), a.size());
    } else {
        for (const auto& a : answer.ipv4) append(out, a.data(), a.size());
    }
    for (const auto& alias : answer.aliases) append_string(out, alias);
    return out;
}

std::vector<uint8_t> ai_reply(const hostdb::HostAnswer& answer) {
    std::vector<uint8_t> out;
    AiResponseHeader h{};
    h.version = kProtocolVersion;
    if (!answer.found()) {
        append(out, &h, sizeof h);  // found 0: EAI_NONAME
        return out;
    }
    h.found = 1;
    h.naddrs = static_cast<int32_t>(answer.ipv4.size() + answer.ipv6.size());
    h.addrslen = static_cast<int32_t>(answer.ipv4.size() * 4 + answer.ipv6.size() * 16);
    h.canonlen = static_cast<int32_t>(answer.canonical.size() + 1);
    append(out, &h, sizeof h);
    for (const auto& a : answer.ipv4) append(out, a.data(), a.size());
    for (const auto& a : answer.ipv6) append(out, a.data(), a.size());
    out.resize(out.size() + answer.ipv4.size(), static_cast<uint8_t>(kAfInet));
    out.resize(out.size() + answer.ipv6.size(), static_cast<uint8_t>(kAfInet6));
    append_string(out, answer.canonical);
    return out;
}

std::vector<uint8_t> host_disabled_reply() {
    HostResponseHeader h{kProtocolVersion, -1, 0, 0, -1, -1, 0, kNetdbInternal};
    std::vector<uint8_t> out;
    append(out, &h, sizeof h);
    return out;
}

}  // namespace nscache::nscd
