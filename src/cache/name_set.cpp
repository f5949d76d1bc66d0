// SPDX-License-Identifier: BSD-3-Clause
#include "cache/name_set.h"

#include <algorithm>

#include "dns/name.h"

namespace nscache::cache {

void NameSet::add_last_label(std::string_view name, const size_t (&offsets)[128], size_t labels) {
    const std::string_view last = name.substr(offsets[labels - 1]);
    if (std::find(last_labels_.begin(), last_labels_.end(), last) == last_labels_.end()) {
        last_labels_.emplace_back(last);
    }
}

void NameSet::add_name(dns::Bytes lower_name) {
    const std::string_view name = dns::name_chars(lower_name);
    size_t offsets[128];
    size_t labels = 0;
    if (!dns::label_offsets(name, offsets, labels)) return;
    if (labels == 0) {
        root_ = true;
        return;
    }
    names_.emplace(name);
    add_last_label(name, offsets, labels);
}

void NameSet::add_subtree(dns::Bytes lower_name) {
    const std::string_view name = dns::name_chars(lower_name);
    size_t offsets[128];
    size_t labels = 0;
    if (!dns::label_offsets(name, offsets, labels)) return;
    if (labels == 0) {
        covers_everything_ = true;
        return;
    }
    subtrees_.emplace(name);
    add_last_label(name, offsets, labels);
}

void NameSet::add_exception(dns::Bytes lower_name) {
    const std::string_view name = dns::name_chars(lower_name);
    size_t offsets[128];
    size_t labels = 0;
    if (!dns::label_offsets(name, offsets, labels) || labels == 0) return;
    exceptions_.emplace(name);
}

bool NameSet::covers(dns::Bytes lower_name) const {
    if (empty()) return false;
    const std::string_view name = dns::name_chars(lower_name);
    size_t offsets[128];
    size_t labels = 0;
    if (!dns::label_offsets(name, offsets, labels)) return false;
    if (covers_everything_ && exceptions_.empty()) return true;
    if (labels == 0) return root_ || covers_everything_;
    // Only a name whose last label ends one of the names or subtrees can be covered (a few:
    // arpa, localhost, bind, ...): most cached names end in none and cost no hash lookup.
    const std::string_view last = name.substr(offsets[labels - 1]);
    if (!covers_everything_ &&
        std::find(last_labels_.begin(), last_labels_.end(), last) == last_labels_.end()) {
        return false;
    }
    if (names_.find(name) != names_.end()) return true;
    for (size_t i = 0; i < labels; ++i) {  // the longest suffix decides
        const std::string_view suffix = name.substr(offsets[i]);
        if (subtrees_.find(suffix) != subtrees_.end()) return true;
        if (!exceptions_.empty() && exceptions_.find(suffix) != exceptions_.end()) return false;
    }
    return covers_everything_;
}

}  // namespace nscache::cache
