// SPDX-License-Identifier: BSD-3-Clause
#include "hostdb/search_list.h"

#include <netinet/in.h>
#include <resolv.h>
#include <sys/stat.h>

#include <cstring>

namespace nscache::hostdb {
namespace {

constexpr uint64_t kCheckIntervalMs = 1000;
constexpr size_t kMaxNameText = 253;

std::string stat_fingerprint(const std::string& path) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) return "missing";
    return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" +
           std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
           std::to_string(st.st_mtim.tv_nsec) + ":" + std::to_string(st.st_ctim.tv_nsec);
}

SearchConfig load(const std::string& path) {
    // res_ninit reads _PATH_RESCONF only (tests bind-mount their own over it); another path
    // gets glibc's defaults.
    SearchConfig c;
    struct __res_state st;
    std::memset(&st, 0, sizeof st);
    if (path == _PATH_RESCONF) {
        res_ninit(&st);  // on failure it still leaves glibc's defaults
        c.ndots = st.ndots;
        c.defnames = (st.options & RES_DEFNAMES) != 0;
        c.dnsrch = (st.options & RES_DNSRCH) != 0;
        c.no_tld_query = (st.options & RES_NOTLDQUERY) != 0;
        for (unsigned i = 0; i < MAXDNSRCH && st.dnsrch[i] != nullptr; ++i) {
            if (std::strlen(st.dnsrch[i]) <= kMaxNameText) c.domains.emplace_back(st.dnsrch[i]);
        }
        res_nclose(&st);
    }
    return c;
}

}  // namespace

const SearchConfig& SearchConfigSource::get(uint64_t now_ms) {
    if (loaded_ && now_ms < next_check_ms_) return config_;
    next_check_ms_ = now_ms + kCheckIntervalMs;
    std::string seen = stat_fingerprint(path_);
    if (loaded_ && seen == seen_) return config_;
    seen_ = std::move(seen);
    config_ = load(path_);
    loaded_ = true;
    return config_;
}

SearchPlan::SearchPlan(const SearchConfig& config, std::string_view name) : config_(config) {
    name_ = std::string(name);
    trailing_dot_ = !name_.empty() && name_.back() == '.';
    for (char c : name_) dots_ += c == '.';
    while (!name_.empty() && name_.back() == '.') name_.pop_back();
    if (name_.empty() || name_.size() > kMaxNameText) step_ = Step::Done;
}

SearchPlan SearchPlan::single(std::string_view name) {
    SearchPlan p(SearchConfig{}, name);
    p.single_ = true;
    p.trailing_dot_ = true;  // as is, and nothing else
    return p;
}

std::string SearchPlan::joined(std::string_view domain) const {
    if (domain.empty()) return name_;
    std::string out = name_;
    out += '.';
    out += domain;
    return out;
}

void SearchPlan::finish(SearchOutcome outcome) {
    result_ = outcome;
    step_ = Step::Done;
}

// The steps of glibc's res_search (resolv/res_query.c), one candidate at a time.
std::optional<std::string> SearchPlan::next() {
    for (;;) {
        switch (step_) {
            case Step::AsIs:
                step_ = Step::Domains;
                if (dots_ >= config_.ndots || trailing_dot_) {
                    tried_as_is_ = true;
                    asked_last_ = false;
                    return name_;
                }
                continue;
            case Step::Domains: {
                const bool searching = (dots_ == 0 && config_.defnames) ||
                                       (dots_ > 0 && !trailing_dot_ && config_.dnsrch);
                if (searching && domain_ < config_.domains.size() &&
                    (domain_ == 0 || config_.dnsrch)) {
                    std::string_view domain = config_.domains[domain_++];
                    searched_ = true;
                    if (!domain.empty() && domain.front() == '.') domain.remove_prefix(1);
                    if (domain.empty()) root_on_list_ = true;
                    asked_last_ = false;
                    const std::string candidate = joined(domain);
                    if (candidate.size() > kMaxNameText) continue;
                    return candidate;
                }
                step_ = Step::Last;
                continue;
            }
            case Step::Last:
                step_ = Step::Done;
                if ((dots_ > 0 || !searched_ || !config_.no_tld_query) && !tried_as_is_ &&
                    !root_on_list_) {
                    asked_last_ = true;
                    step_ = Step::Last;  // report() decides
                    return name_;
                }
                finish(tried_as_is_    ? saved_
                       : got_nodata_   ? SearchOutcome::NoData
                       : got_servfail_ ? SearchOutcome::ServFail
                                       : SearchOutcome::NotFound);
                return std::nullopt;
            case Step::Done:
                return std::nullopt;
        }
    }
}

void SearchPlan::report(SearchOutcome o) {
    if (step_ == Step::Done) return;
    const bool stops = o == SearchOutcome::Found || o == SearchOutcome::Failed;
    if (single_) {
        finish(o);
        return;
    }
    if (asked_last_) {
        // res_search keeps h_errno from this last try unless an earlier one says more.
        if (stops || (!got_nodata_ && !got_servfail_)) {
            finish(o);
        } else {
            finish(got_nodata_ ? SearchOutcome::NoData : SearchOutcome::ServFail);
        }
        return;
    }
    if (stops) {
        finish(o);
        return;
    }
    if (step_ == Step::Domains && tried_as_is_ && domain_ == 0 && !searched_) {
        // The answer to the name as is (the first step).
        if (trailing_dot_) {
            finish(o);
            return;
        }
        saved_ = o;
        return;
    }
    if (o == SearchOutcome::NoData) got_nodata_ = true;
    if (o == SearchOutcome::ServFail) got_servfail_ = true;
}

}  // namespace nscache::hostdb
