// SPDX-License-Identifier: BSD-3-Clause
#include "cache/domain_ttl_caps.h"

#include <algorithm>

#include "dns/name.h"

namespace nscache::cache {
namespace {

bool has_cap(const DomainTtlCaps::Caps& caps) {
    return caps.max_ttl != DomainTtlCaps::kNoCap || caps.negative_max_ttl != DomainTtlCaps::kNoCap;
}

}  // namespace

void DomainTtlCaps::add(dns::Bytes lower_domain, Caps caps) {
    const std::string_view name = dns::name_chars(lower_domain);
    size_t offsets[128];
    size_t labels = 0;
    if (!dns::label_offsets(name, offsets, labels)) return;
    if (labels == 0) {
        if (has_root_) return;
        has_root_ = true;
        root_ = caps;
    } else {
        if (!domains_.emplace(name, caps).second) return;
        const std::string_view last = name.substr(offsets[labels - 1]);
        if (std::find(last_labels_.begin(), last_labels_.end(), last) == last_labels_.end()) {
            last_labels_.emplace_back(last);
        }
    }
    any_cap_ = any_cap_ || has_cap(caps);
}

const DomainTtlCaps::Caps* DomainTtlCaps::find(dns::Bytes lower_name) const {
    const Caps* fallback = has_root_ ? &root_ : nullptr;
    if (domains_.empty()) return fallback;
    const std::string_view name = dns::name_chars(lower_name);
    size_t offsets[128];
    size_t labels = 0;
    if (!dns::label_offsets(name, offsets, labels) || labels == 0) return fallback;
    const std::string_view last = name.substr(offsets[labels - 1]);
    if (std::find(last_labels_.begin(), last_labels_.end(), last) == last_labels_.end()) {
        return fallback;
    }
    for (size_t i = 0; i < labels; ++i) {  // the whole name first: the longest domain wins
        if (auto it = domains_.find(name.substr(offsets[i])); it != domains_.end()) {
            return &it->second;
        }
    }
    return fallback;
}

TtlPolicy DomainTtlCaps::capped(TtlPolicy policy, const Caps& caps) {
    policy.max_ttl = std::min(policy.max_ttl, caps.max_ttl);
    policy.negative_max_ttl = std::min(policy.negative_max_ttl, caps.negative_max_ttl);
    policy.min_ttl = std::min(policy.min_ttl, policy.max_ttl);
    return policy;
}

}  // namespace nscache::cache
