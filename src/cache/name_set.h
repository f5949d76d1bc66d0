// SPDX-License-Identifier: BSD-3-Clause
// A set of names and of whole subtrees (lower-case uncompressed wire names), for what the
// cache must not hold: the answers the routing gives itself (local names, local zones, the
// CHAOS identities). One membership test costs a hash lookup per label of the name asked
// about, whatever the number of names and zones in the set, so a pass over the cache that
// drops all of them is one pass, not one per zone.
//
// Built once, then read only: const calls may run on any number of threads at once.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "dns/wire.h"

namespace nscache::cache {

class NameSet {
  public:
    // `lower_name`: a wire name, lower-case. The name itself only. A malformed name is
    // ignored.
    void add_name(dns::Bytes lower_name);
    // The name and every name below it (the root: every name). A malformed name is ignored.
    void add_subtree(dns::Bytes lower_name);

    // The name and every name below it are not covered after all, unless by a longer subtree
    // or as a name of their own: a [[forward]] domain under a local zone ("cluster.local"
    // under "local") goes upstream, so the cache may hold its answers.
    void add_exception(dns::Bytes lower_name);

    bool empty() const {
        return names_.empty() && subtrees_.empty() && !covers_everything_ && !root_;
    }
    // Whether `lower_name` (a wire name, lower-case) is one of the names or at or under one of
    // the subtrees. A malformed name (a label past its end, no root label) is never covered.
    bool covers(dns::Bytes lower_name) const;

  private:
    struct Hash {
        using is_transparent = void;
        size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
    };
    using Set = std::unordered_set<std::string, Hash, std::equal_to<>>;
    Set names_;
    Set subtrees_;
    Set exceptions_;
    // Notes the last label of a name added (`offsets` from its label walk).
    void add_last_label(std::string_view name, const size_t (&offsets)[128], size_t labels);

    std::vector<std::string> last_labels_;  // of names and subtrees, each with the root after it
    bool covers_everything_ = false;        // the root's subtree
    bool root_ = false;                     // the root name itself
};

}  // namespace nscache::cache
