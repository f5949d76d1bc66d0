// SPDX-License-Identifier: BSD-3-Clause
// resolv.conf's search list, ndots and options, read through glibc's own res_ninit (which only
// parses the file; it resolves nothing) and reloaded when the file changes; and the order in
// which glibc's res_search tries candidate names, as a plan the caller drives one answer at a
// time. SearchConfigSource belongs to one thread; SearchPlan is a value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace nscache::hostdb {

struct SearchConfig {
    unsigned ndots = 1;
    bool defnames = true;       // RES_DEFNAMES: a name without dots gets the search list
    bool dnsrch = true;         // RES_DNSRCH: so does a name with dots (below ndots)
    bool no_tld_query = false;  // options no-tld-query
    std::vector<std::string> domains;
};

class SearchConfigSource {
  public:
    explicit SearchConfigSource(std::string path = "/etc/resolv.conf") : path_(std::move(path)) {}
    // The configuration, re-read when the file changed (looked at once a second at most).
    const SearchConfig& get(uint64_t now_ms);

  private:
    std::string path_;
    SearchConfig config_;
    bool loaded_ = false;
    uint64_t next_check_ms_ = 0;
    std::string seen_;  // stat fields of the file as last read
};

// What one candidate name answered, as res_search tells its tries apart.
enum class SearchOutcome : uint8_t {
    Found,
    NotFound,  // NXDOMAIN
    NoData,
    ServFail,  // an answer with SERVFAIL: the search goes on
    Failed,    // no answer at all (timeout): the search stops
};

class SearchPlan {
  public:
    // `name` as the program asked it (a trailing dot means: that name only).
    SearchPlan(const SearchConfig& config, std::string_view name);
    // Only `name` itself (the NSS module runs the search list itself).
    static SearchPlan single(std::string_view name);

    // The next name to ask (no trailing dot), or nullopt once the search is over.
    std::optional<std::string> next();
    // The outcome of the name next() returned last.
    void report(SearchOutcome outcome);
    // The search's outcome once next() returned nullopt.
    SearchOutcome result() const { return result_; }

  private:
    enum class Step : uint8_t { AsIs, Domains, Last, Done };
    std::string joined(std::string_view domain) const;
    void finish(SearchOutcome outcome);

    SearchConfig config_;
    std::string name_;  // without a trailing dot
    bool trailing_dot_ = false;
    unsigned dots_ = 0;
    Step step_ = Step::AsIs;
    size_t domain_ = 0;
    bool asked_last_ = false;  // the last name asked was the name as is (Step::Last)
    bool tried_as_is_ = false, searched_ = false, root_on_list_ = false;
    bool got_nodata_ = false, got_servfail_ = false;
    SearchOutcome saved_ = SearchOutcome::NotFound;
    SearchOutcome result_ = SearchOutcome::NotFound;
    bool single_ = false;
};

}  // namespace nscache::hostdb
