// SPDX-License-Identifier: BSD-3-Clause
// Caps on cached TTLs that hold under some domains only ([[forward]] rules' max-ttl and
// negative-max-ttl), for entries that enter the cache without coming through the rule's
// upstream query: a cache file or a takeover's cache read at start. The longest domain at or
// above a name wins, as the routing picks a rule, so a rule without caps under a capped one
// is listed too (with no caps).
//
// One lookup costs a walk of the name's labels and, only when its last label ends one of the
// domains (few: "local", "internal", ...), a hash lookup per label.
//
// Built once, then read only: const calls may run on any number of threads at once.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cache/answer.h"
#include "dns/wire.h"

namespace nscache::cache {

class DomainTtlCaps {
  public:
    static constexpr uint32_t kNoCap = UINT32_MAX;
    struct Caps {
        uint32_t max_ttl = kNoCap;
        uint32_t negative_max_ttl = kNoCap;
    };

    // `lower_domain`: a wire name, lower-case; the root stands for every name under no other
    // domain. A malformed name is ignored; a domain added twice keeps its first caps.
    void add(dns::Bytes lower_domain, Caps caps);
    // True when no domain (the root included) has a cap: lookups can be skipped.
    bool empty() const { return !any_cap_; }
    // The caps of the longest domain at or above `lower_name`; null when none is listed.
    const Caps* find(dns::Bytes lower_name) const;
    // `policy` under `caps`, as the rule's upstream queries apply them: the smaller cap wins,
    // and min-ttl never lifts a TTL over a cap.
    static TtlPolicy capped(TtlPolicy policy, const Caps& caps);

  private:
    struct Hash {
        using is_transparent = void;
        size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
    };
    std::unordered_map<std::string, Caps, Hash, std::equal_to<>> domains_;
    std::vector<std::string> last_labels_;  // of the domains, each with the root after it
    Caps root_;
    bool has_root_ = false;
    bool any_cap_ = false;
};

}  // namespace nscache::cache
