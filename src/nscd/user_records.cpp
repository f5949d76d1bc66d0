// SPDX-License-Identifier: BSD-3-Clause
#include "nscd/user_records.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/bytes.h"

namespace nscache::nscd {
namespace {

void append(std::vector<uint8_t>& out, const void* p, size_t n) {
    const size_t at = out.size();
    out.resize(at + n);
    if (n != 0) copy_bytes(out.data() + at, p, n);
}

void append_string(std::vector<uint8_t>& out, const std::string& s) {
    append(out, s.c_str(), s.size() + 1);
}

int32_t len_of(const std::string& s) {
    return static_cast<int32_t>(s.size() + 1);
}

template <typename Header>
std::vector<uint8_t> header_only(const Header& h) {
    std::vector<uint8_t> out;
    append(out, &h, sizeof h);
    return out;
}

}  // namespace

std::vector<uint8_t> passwd_record(const nsdb::PasswdEntry* e) {
    if (e == nullptr) {
        // As nscd's notfound: ids -1.
        return header_only(PwResponseHeader{kProtocolVersion, 0, 0, 0, ~0u, ~0u, 0, 0, 0});
    }
    PwResponseHeader h{};
    h.version = kProtocolVersion;
    h.found = 1;
    h.pw_name_len = len_of(e->name);
    h.pw_passwd_len = len_of(e->passwd);
    h.pw_uid = static_cast<decltype(h.pw_uid)>(e->uid);
    h.pw_gid = static_cast<decltype(h.pw_gid)>(e->gid);
    h.pw_gecos_len = len_of(e->gecos);
    h.pw_dir_len = len_of(e->dir);
    h.pw_shell_len = len_of(e->shell);
    std::vector<uint8_t> out = header_only(h);
    for (const std::string* s : {&e->name, &e->passwd, &e->gecos, &e->dir, &e->shell}) {
        append_string(out, *s);
    }
    return out;
}

std::vector<uint8_t> group_record(const nsdb::GroupEntry* e) {
    if (e == nullptr) return header_only(GrResponseHeader{kProtocolVersion, 0, 0, 0, ~0u, 0});
    GrResponseHeader h{};
    h.version = kProtocolVersion;
    h.found = 1;
    h.gr_name_len = len_of(e->name);
    h.gr_passwd_len = len_of(e->passwd);
    h.gr_gid = static_cast<decltype(h.gr_gid)>(e->gid);
    h.gr_mem_cnt = static_cast<int32_t>(e->members.size());
    std::vector<uint8_t> out = header_only(h);
    for (const std::string& m : e->members) {
        const auto len = static_cast<uint32_t>(m.size() + 1);
        append(out, &len, sizeof len);
    }
    append_string(out, e->name);
    append_string(out, e->passwd);
    for (const std::string& m : e->members) append_string(out, m);
    return out;
}

std::vector<uint8_t> initgroups_record(const std::vector<uint32_t>* gids) {
    if (gids == nullptr) return header_only(InitgrResponseHeader{kProtocolVersion, 0, 0});
    InitgrResponseHeader h{kProtocolVersion, 1, static_cast<int32_t>(gids->size())};
    std::vector<uint8_t> out = header_only(h);
    for (uint32_t g : *gids) {
        const auto v = static_cast<int32_t>(g);
        append(out, &v, sizeof v);
    }
    return out;
}

std::vector<uint8_t> service_record(const nsdb::ServiceEntry* e) {
    if (e == nullptr) return header_only(ServResponseHeader{kProtocolVersion, 0, 0, 0, 0, -1});
    ServResponseHeader h{};
    h.version = kProtocolVersion;
    h.found = 1;
    h.s_name_len = len_of(e->name);
    h.s_proto_len = len_of(e->proto);
    h.s_aliases_cnt = static_cast<int32_t>(e->aliases.size());
    h.s_port = e->port;
    std::vector<uint8_t> out = header_only(h);
    append_string(out, e->name);
    append_string(out, e->proto);
    for (const std::string& a : e->aliases) {
        const auto len = static_cast<uint32_t>(a.size() + 1);
        append(out, &len, sizeof len);
    }
    for (const std::string& a : e->aliases) append_string(out, a);
    return out;
}

std::vector<uint8_t> declined_reply(RequestType type) {
    switch (type) {
        case GETPWBYNAME:
        case GETPWBYUID:
            return header_only(PwResponseHeader{kProtocolVersion, -1, 0, 0, 0, 0, 0, 0, 0});
        case GETGRBYNAME:
        case GETGRBYGID:
            return header_only(GrResponseHeader{kProtocolVersion, -1, 0, 0, 0, 0});
        case INITGROUPS:
            return header_only(InitgrResponseHeader{kProtocolVersion, -1, 0});
        case GETSERVBYNAME:
        case GETSERVBYPORT:
            return header_only(ServResponseHeader{kProtocolVersion, -1, 0, 0, 0, -1});
        case GETNETGRENT:
            return header_only(NetgroupResponseHeader{kProtocolVersion, -1, 0, 0});
        case INNETGR:
            return header_only(InnetgroupResponseHeader{kProtocolVersion, -1, 0});
        default:
            return {};
    }
}

std::vector<uint8_t> name_key(const std::string& name) {
    std::vector<uint8_t> k(name.begin(), name.end());
    k.push_back(0);
    return k;
}

std::vector<uint8_t> id_key(uint32_t id) {
    return name_key(std::to_string(id));
}

bool key_string(const std::vector<uint8_t>& key, std::string& out) {
    if (key.empty() || key.back() != 0) return false;
    out.assign(reinterpret_cast<const char*>(key.data()), key.size() - 1);
    return out.find('\0') == std::string::npos;
}

std::optional<uint32_t> parse_id(const std::string& s) {
    if (s.empty() || s.size() > 10 || s[0] < '0' || s[0] > '9') return std::nullopt;
    char* end = nullptr;
    errno = 0;
    const unsigned long v = std::strtoul(s.c_str(), &end, 10);
    if (errno != 0 || end == nullptr || *end != '\0' || v > 0xffffffffUL) return std::nullopt;
    return static_cast<uint32_t>(v);
}

bool split_service_key(const std::string& key, std::string& crit, std::string& proto) {
    const size_t slash = key.find('/');
    if (slash == std::string::npos) return false;
    crit = key.substr(0, slash);
    proto = key.substr(slash + 1);
    return true;
}

}  // namespace nscache::nscd
