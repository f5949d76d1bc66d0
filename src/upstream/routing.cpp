// SPDX-License-Identifier: BSD-3-Clause
#include "upstream/routing.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "common/hash.h"
#include "dns/name.h"

namespace nscache::upstream {
namespace {

// RFC 6761 and friends: names that have no business leaving the host.
constexpr const char* kLocalZones[] = {
    "local.",      // RFC 6762: mDNS, never unicast DNS
    "invalid.",    // RFC 6761 §6.4
    "onion.",      // RFC 7686
    "home.arpa.",  // RFC 8375
};

// RFC 6303 §4 (with RFC 7793's shared address space): reverse zones of addresses that only
// mean something on the local network. Their PTR queries are answered NXDOMAIN here instead
// of loading the public servers of in-addr.arpa and ip6.arpa.
std::vector<std::string> private_reverse_zones() {
    std::vector<std::string> zones = {
        "10.in-addr.arpa.",
        "168.192.in-addr.arpa.",
        "0.in-addr.arpa.",
        "127.in-addr.arpa.",
        "254.169.in-addr.arpa.",
        "2.0.192.in-addr.arpa.",
        "100.51.198.in-addr.arpa.",
        "113.0.203.in-addr.arpa.",
        "255.255.255.255.in-addr.arpa.",
        "d.f.ip6.arpa.",
        "8.e.f.ip6.arpa.",
        "9.e.f.ip6.arpa.",
        "a.e.f.ip6.arpa.",
        "b.e.f.ip6.arpa.",
        "8.b.d.0.1.0.0.2.ip6.arpa.",
    };
    for (int i = 16; i <= 31; ++i) zones.push_back(std::to_string(i) + ".172.in-addr.arpa.");
    for (int i = 64; i <= 127; ++i) zones.push_back(std::to_string(i) + ".100.in-addr.arpa.");
    std::string zero, one;
    for (int i = 0; i < 32; ++i) zero += "0.";
    zones.push_back(zero + "ip6.arpa.");  // ::
    one = "1." + zero.substr(2);
    zones.push_back(one + "ip6.arpa.");  // ::1
    return zones;
}

std::string wire_of(const std::string& text) {
    auto name = dns::name_from_text(text);
    dns::NameBuffer lower;
    dns::lower_name(name->view(), lower);
    return std::string(reinterpret_cast<const char*>(lower.bytes), lower.length);
}

std::string reverse_text(uint16_t type, const std::string& address) {
    uint8_t bytes[16];
    std::string text;
    if (type == dns::rtype::A) {
        inet_pton(AF_INET, address.c_str(), bytes);
        for (int i = 3; i >= 0; --i) text += std::to_string(bytes[i]) + ".";
        return text + "in-addr.arpa.";
    }
    inet_pton(AF_INET6, address.c_str(), bytes);
    static const char kHex[] = "0123456789abcdef";
    for (int i = 15; i >= 0; --i) {
        text += kHex[bytes[i] & 0xF];
        text += '.';
        text += kHex[bytes[i] >> 4];
        text += '.';
    }
    return text + "ip6.arpa.";
}

LocalRecordData rdata_of(uint16_t type, const std::string& value) {
    LocalRecordData r;
    r.type = type;
    switch (type) {
        case dns::rtype::A:
            r.rdata.resize(4);
            inet_pton(AF_INET, value.c_str(), r.rdata.data());
            break;
        case dns::rtype::AAAA:
            r.rdata.resize(16);
            inet_pton(AF_INET6, value.c_str(), r.rdata.data());
            break;
        case dns::rtype::CNAME:
        case dns::rtype::PTR: {
            const std::string wire = wire_of(value);
            r.rdata.assign(wire.begin(), wire.end());
            break;
        }
        case dns::rtype::TXT:  // one character-string (config limits it to 255 bytes)
            r.rdata.resize(1 + value.size());
            r.rdata[0] = static_cast<uint8_t>(value.size());
            std::memcpy(r.rdata.data() + 1, value.data(), value.size());
            break;
        default:
            break;
    }
    return r;
}

}  // namespace

std::shared_ptr<UpstreamServer> UpstreamRegistry::get(const UpstreamAddress& address,
                                                      const std::vector<SpkiPin>& pins) {
    std::string pin;
    for (const auto& p : pins) {
        if (address.tls && p.address == address.address) pin = p.sha256;
    }
    for (const auto& weak : known_) {
        auto server = weak.lock();
        if (server && server->address == address.address && server->tls == address.tls &&
            server->https == address.https && server->path == address.path &&
            server->tls_peer.auth_name == address.auth_name &&
            server->tls_peer.spki_sha256 == pin) {
            return server;
        }
    }
    std::erase_if(known_, [](const auto& w) { return w.expired(); });
    auto server = std::make_shared<UpstreamServer>(address);
    server->tls_peer.spki_sha256 = pin;
    known_.push_back(server);
    return server;
}

namespace {

// What a forwarding rule other than the default is, as the shared tier's keys name it.
std::string shared_view_of(const ForwardZone& zone) {
    std::string what;
    for (const std::string& d : zone.domains) what += d + ' ';
    for (const UpstreamAddress& u : zone.upstreams) what += u.to_string() + ' ';
    // Unseeded: the same rule must name the same keys on every host and release.
    const uint64_t h = fnv1a(reinterpret_cast<const uint8_t*>(what.data()), what.size());
    char digest[17];
    std::snprintf(digest, sizeof digest, "%016llx", static_cast<unsigned long long>(h));
    return zone.domains.front() + '#' + digest;
}

}  // namespace

std::shared_ptr<const Routing> Routing::build(const Config& config, UpstreamRegistry& known,
                                              const std::vector<HostsEntry>& hosts) {
    auto routing = std::make_shared<Routing>();
    auto set_of = [&known, &config](const std::vector<UpstreamAddress>& addresses,
                                    ForwardTransport transport = ForwardTransport::Udp) {
        // An address listed twice is one server: RFC 9520's per-server limit counts it once.
        std::vector<std::shared_ptr<UpstreamServer>> servers;
        for (const auto& a : addresses) {
            auto server = known.get(a, config.tls_pins);
            if (std::find(servers.begin(), servers.end(), server) == servers.end()) {
                servers.push_back(std::move(server));
            }
        }
        auto set = std::make_shared<UpstreamSet>(std::move(servers));
        set->set_tcp_only(transport == ForwardTransport::Tcp);
        return set;
    };
    // The default rule first: `upstream` (or resolv.conf's), unless a [[forward]] names ".".
    routing->rules_.push_back(ForwardRule{".", {"."}, set_of(config.upstreams), true, {}});
    for (const ForwardZone& zone : config.forwards) {
        const bool is_default =
            std::find(zone.domains.begin(), zone.domains.end(), ".") != zone.domains.end();
        size_t index = 0;
        ForwardRule rule{is_default ? "." : zone.domains.front(),
                         zone.domains,
                         set_of(zone.upstreams, zone.transport),
                         zone.cache,
                         is_default ? std::string() : shared_view_of(zone),
                         zone.max_ttl,
                         zone.negative_max_ttl};
        if (is_default) {
            routing->rules_[0] = std::move(rule);
        } else {
            index = routing->rules_.size();
            routing->rules_.push_back(std::move(rule));
        }
        for (const std::string& domain : zone.domains) {
            if (domain != ".") routing->zones_[wire_of(domain)] = Zone{RouteKind::Forward, index};
        }
    }
    // Built-in zones, where no [[forward]] names the same domain.
    auto local_zone = [&routing](const std::string& domain, RouteKind kind) {
        routing->zones_.try_emplace(wire_of(domain), Zone{kind, 0});
    };
    local_zone("localhost.", RouteKind::Localhost);
    if (!config.forward_private_zones) {
        for (const char* zone : kLocalZones) local_zone(zone, RouteKind::LocalNxdomain);
        for (const std::string& zone : private_reverse_zones()) {
            local_zone(zone, RouteKind::LocalNxdomain);
        }
    }
    // Local names: the configured records first (an explicit PTR wins), then the hosts file;
    // each address also answers its reverse name, with the first name that claimed it.
    auto add = [&routing](const std::string& name, uint16_t type, const std::string& value) {
        routing->names_[wire_of(name)].push_back(rdata_of(type, value));
    };
    for (const LocalRecord& r : config.local_records) add(r.name, r.type, r.value);
    for (const HostsEntry& h : hosts) add(h.name, h.type, h.address);
    auto add_reverse = [&](const std::string& name, uint16_t type, const std::string& address) {
        const std::string reverse = wire_of(reverse_text(type, address));
        auto& records = routing->names_[reverse];
        const bool has_ptr = std::any_of(records.begin(), records.end(),
                                         [](const auto& r) { return r.type == dns::rtype::PTR; });
        if (!has_ptr) records.push_back(rdata_of(dns::rtype::PTR, name));
    };
    for (const LocalRecord& r : config.local_records) {
        if (r.type == dns::rtype::A || r.type == dns::rtype::AAAA)
            add_reverse(r.name, r.type, r.value);
    }
    for (const HostsEntry& h : hosts) add_reverse(h.name, h.type, h.address);
    return routing;
}

Route Routing::route(dns::Bytes lower_name) const {
    const std::string_view name(reinterpret_cast<const char*>(lower_name.data()),
                                lower_name.size());
    if (!names_.empty()) {
        if (auto it = names_.find(name); it != names_.end()) {
            return Route{RouteKind::LocalName, nullptr, &it->second, 0};
        }
    }
    // Suffixes from the whole name down, label by label: the first one known is the longest.
    size_t offset = 0;
    while (offset < lower_name.size() && lower_name[offset] != 0) {
        if (auto it = zones_.find(name.substr(offset)); it != zones_.end()) {
            const Zone& z = it->second;
            if (z.kind == RouteKind::Forward)
                return Route{RouteKind::Forward, &rules_[z.rule], nullptr, offset};
            return Route{z.kind, nullptr, nullptr, offset};
        }
        offset += 1 + size_t{lower_name[offset]};
    }
    // The default rule's domain is the root.
    return Route{RouteKind::Forward, &rules_[0], nullptr,
                 lower_name.empty() ? 0 : lower_name.size() - 1};
}

const std::vector<LocalRecordData>* Routing::local(dns::Bytes lower_name) const {
    const std::string_view name(reinterpret_cast<const char*>(lower_name.data()),
                                lower_name.size());
    auto it = names_.find(name);
    return it == names_.end() ? nullptr : &it->second;
}

std::vector<std::shared_ptr<UpstreamServer>> Routing::servers() const {
    std::vector<std::shared_ptr<UpstreamServer>> all;
    for (const ForwardRule& rule : rules_) {
        for (size_t i = 0; i < rule.upstreams->size(); ++i) {
            const auto& s = rule.upstreams->shared(i);
            if (std::find(all.begin(), all.end(), s) == all.end()) all.push_back(s);
        }
    }
    return all;
}

size_t Routing::upstream_count() const {
    return servers().size();
}

std::string Routing::destination(const Zone& zone) const {
    if (zone.kind != RouteKind::Forward) return std::to_string(static_cast<int>(zone.kind));
    const ForwardRule& rule = rules_[zone.rule];
    std::string d = rule.cache ? "forward" : "forward no-cache";
    // Lower caps: answers cached under the old ones may outlive them (a transport change
    // keeps the answers, which are the same).
    if (rule.max_ttl != kNoTtlCap) d += " max-ttl " + std::to_string(rule.max_ttl);
    if (rule.negative_max_ttl != kNoTtlCap) {
        d += " negative-max-ttl " + std::to_string(rule.negative_max_ttl);
    }
    for (size_t i = 0; i < rule.upstreams->size(); ++i) {
        d += ' ';
        d += rule.upstreams->at(i).address.to_string();
    }
    return d;
}

std::vector<std::string> Routing::moved_domains(const Routing& before) const {
    std::vector<std::string> moved;
    for (const auto& [domain, zone] : zones_) {
        auto old = before.zones_.find(domain);
        if (old == before.zones_.end() || before.destination(old->second) != destination(zone)) {
            moved.push_back(domain);
        }
    }
    for (const auto& [domain, zone] : before.zones_) {
        if (zones_.find(domain) == zones_.end()) moved.push_back(domain);
    }
    return moved;
}

std::vector<std::string> Routing::local_zones() const {
    std::vector<std::string> zones;
    for (const auto& [domain, zone] : zones_) {
        if (zone.kind != RouteKind::Forward) zones.push_back(domain);
    }
    return zones;
}

std::vector<std::string> Routing::forward_domains() const {
    std::vector<std::string> domains;
    for (const auto& [domain, zone] : zones_) {
        if (zone.kind == RouteKind::Forward) domains.push_back(domain);
    }
    return domains;
}

std::vector<std::string> Routing::local_names() const {
    std::vector<std::string> names;
    for (const auto& [name, records] : names_) names.push_back(name);
    return names;
}

}  // namespace nscache::upstream
