// SPDX-License-Identifier: BSD-3-Clause
// Saving the cache to a file and reading it back (the `cache-file` option at start and stop,
// `nscache dump` and `nscache load` on the control thread; whichever thread calls, the cache
// is read and filled through its own shard locks). Entries carry absolute (wall-clock) birth times,
// so what was fresh at dump time is loaded with the TTL it has left, and what has expired since is
// skipped.
//
// Writing is atomic: a temporary file beside the target, fsync, rename, fsync of the folder;
// a crash at any point leaves the previous file whole. Links are never followed: the
// temporary file is created with O_EXCL|O_NOFOLLOW (a stale one is unlinked first), the
// rename replaces a link at the target instead of writing through it, and a load opens with
// O_NOFOLLOW and takes only a regular file. Reading checks the magic, version,
// checksum and every entry (each is parsed as a DNS message) and rejects the whole file on
// any fault: a damaged file never puts anything in the cache. Loaded entries go through the
// daemon's TTL rules again (min-ttl, max-ttl, negative-max-ttl, a rule's own caps), as
// answers from upstream do.
// Dumping copies one slice of one shard at a time, so queries never wait on it for long.
#pragma once

#include <cstdint>
#include <string>

#include "cache/answer.h"
#include "cache/cache.h"
#include "cache/domain_ttl_caps.h"
#include "cache/name_set.h"
#include "common/result.h"

namespace nscache::cache {

// Each returns the number of entries written or inserted, or what was wrong (for the log and
// the control client).
Result<uint64_t> dump_cache(const Cache& cache, const std::string& path, uint64_t now_ms,
                            uint64_t wall_now_ms);

// The same format written to an open descriptor from its current offset (a memfd handed to
// another process, for --takeover). No rename, no fsync: the caller owns the descriptor and
// decides what durability it needs; it stays open. A failed write leaves partial bytes,
// which load_cache_fd rejects (no trailer, bad checksum).
Result<uint64_t> dump_cache_fd(const Cache& cache, int fd, uint64_t now_ms, uint64_t wall_now_ms);

// How a load inserts what it reads.
struct LoadOptions {
    // Entries whose name this covers (what the routing answers itself) are checked like the
    // rest but neither inserted nor counted: at start this replaces a pass over the filled
    // cache to flush them.
    const NameSet* leave_out = nullptr;
    // Per-domain caps ([[forward]] rules' max-ttl and negative-max-ttl) over `policy`: each
    // entry is clamped to those of its name's domain, as the rule's upstream answers are.
    const DomainTtlCaps* ttl_caps = nullptr;
    // The cache is empty and no other thread touches it until the load returns (at start,
    // before the workers): entries go in as they are checked, in one pass over the file, and
    // a fault found later empties the cache again, which leaves it as it was. Otherwise (the
    // control thread's `nscache load`, workers answering from the cache) every entry is checked
    // before the first is inserted, and a second pass checks each again as it goes in.
    bool cache_is_private = false;
};

// Parses and checks the whole file; a fault anywhere leaves the cache as it was.
Result<uint64_t> load_cache(Cache& cache, const std::string& path, const TtlPolicy& policy,
                            uint64_t now_ms, uint64_t wall_now_ms, const LoadOptions& options = {});

// The same load from an open descriptor, which must be a regular file (a memfd is one);
// it is read from offset 0 whatever its current offset (a memfd just written sits at its
// end) and left open and at the offset it had. The descriptor may come from another process:
// every check of load_cache applies.
Result<uint64_t> load_cache_fd(Cache& cache, int fd, const TtlPolicy& policy, uint64_t now_ms,
                               uint64_t wall_now_ms, const LoadOptions& options = {});

// The same check and insertion for bytes already in memory (the fuzz target uses this).
Result<uint64_t> load_cache_bytes(Cache& cache, const uint8_t* data, size_t size,
                                  const TtlPolicy& policy, uint64_t now_ms, uint64_t wall_now_ms,
                                  const LoadOptions& options = {});

}  // namespace nscache::cache
