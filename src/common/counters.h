// SPDX-License-Identifier: BSD-3-Clause
// The per-thread counters every worker keeps. They are declared once, in the list below, and
// everything else (the stats text, JSON, Prometheus names, docs/interfaces.md) comes from
// this list, so names never drift apart.
//
// Each worker writes only its own block (relaxed atomics, no read-modify-write contention);
// readers sum the blocks when someone asks for stats.
#pragma once

#include <atomic>
#include <cstdint>

#include "common/latency_histogram.h"

namespace nscache {

// X(name, help)
#define NSCACHE_WORKER_COUNTERS(X)                                                                 \
    X(queries, "client queries received, well-formed or not")                                      \
    X(queries_udp, "client queries received over UDP")                                             \
    X(queries_tcp, "client queries received over TCP")                                             \
    X(queries_tls, "client queries received over DNS over TLS")                                    \
    X(queries_https, "client queries received over DNS over HTTPS")                                \
    X(cache_hits, "queries answered from a fresh cache entry")                                     \
    X(cache_misses, "queries not answered from a fresh cache entry")                               \
    X(upstream_queries, "queries sent to upstream servers, retries included")                      \
    X(upstream_timeouts, "upstream attempts that timed out")                                       \
    X(upstream_errors, "upstream answers that were unusable, or sends that failed")                \
    X(upstream_tcp_retries, "upstream answers with TC=1 retried over TCP")                         \
    X(upstream_tcp_fallbacks, "questions asked over TCP after every UDP try timed out")            \
    X(dropped_mismatched, "upstream answers dropped: wrong source, ID or question")                \
    X(upstream_sockets_opened, "UDP sockets opened for the upstream socket pool")                  \
    X(upstream_sockets_spoofed, "pool sockets closed early: a mismatched answer arrived")          \
    X(upstream_bad_cookies, "upstream answers dropped: wrong DNS cookie, or none when expected")   \
    X(upstream_connections, "upstream TCP, TLS and HTTPS connections opened")                      \
    X(upstream_connect_failures, "upstream connections that failed or could not be made")          \
    X(upstream_tls_handshakes, "TLS handshakes with upstreams completed (DoT and DoH)")            \
    X(upstream_tls_resumed, "TLS handshakes that resumed an earlier session")                      \
    X(upstream_tls_auth_failures, "TLS upstreams that failed authentication")                      \
    X(upstream_stream_abandoned,                                                                   \
      "queries given up on an upstream TCP/TLS connection, ID quarantined")                        \
    X(upstream_stream_replaced,                                                                    \
      "upstream TCP/TLS sockets replaced: too many abandoned IDs on them")                         \
    X(upstream_doh_streams, "HTTP/2 streams (one per query) opened to DNS over HTTPS upstreams")   \
    X(upstream_doh_http_errors, "DoH upstream answers with an HTTP status other than 200")         \
    X(upstream_doh_goaway, "GOAWAY frames received from DoH upstreams")                            \
    X(coalesced, "client queries that joined an identical query in flight")                        \
    X(answers_servfail, "SERVFAIL answers sent")                                                   \
    X(answers_formerr, "FORMERR answers sent")                                                     \
    X(answers_notimp, "NOTIMP answers sent")                                                       \
    X(answers_refused, "REFUSED answers sent")                                                     \
    X(answers_truncated, "answers sent with TC=1 because they did not fit")                        \
    X(stale_served, "answers served from expired entries (serve-stale)")                           \
    X(failure_cached, "queries answered at once from a cached resolution failure")                 \
    X(nxdomain_cut, "misses answered NXDOMAIN from an ancestor's cached NXDOMAIN (RFC 8020)")      \
    X(any_partial, "ANY answered with its known half alone: waiting ANY clients held enough")      \
    X(prefetches, "background refreshes of popular entries near expiry")                           \
    X(rate_limited, "queries dropped or truncated by the rate limit")                              \
    X(dropped_overload, "queries dropped because too many clients were waiting already")           \
    X(overload_servfail, "queries answered SERVFAIL at once: max-upstream-queries in flight")      \
    X(tcp_connections, "TCP connections accepted")                                                 \
    X(tcp_rejected, "TCP connections refused over max-tcp-connections")                            \
    X(dot_connections, "DNS over TLS connections accepted")                                        \
    X(dot_rejected, "DNS over TLS connections refused: allow list or connection caps")             \
    X(dot_handshakes, "TLS handshakes completed on DNS over TLS listeners")                        \
    X(dot_resumed, "DNS over TLS handshakes that resumed an earlier session")                      \
    X(dot_handshake_failures, "DNS over TLS handshakes that failed or did not finish in time")     \
    X(nss_requests, "lookups from the NSS module that missed its shared map")                      \
    X(nscd_requests, "host lookups on the nscd socket (misses of the nscd map)")                   \
    X(nscd_other_requests, "passwd, group, services lookups proxied on the nscd socket")           \
    X(nscd_map_rotations, "nscd maps replaced by a new one (full, flushed, or /etc/hosts edited)") \
    X(nscd_map_deferred, "nscd answers not put in the full map: it had rotated under 2 s before")  \
    X(nscd_passwd_hits, "nscd passwd lookups answered from the files or the cache, no NSS call")   \
    X(nscd_passwd_misses,                                                                          \
      "nscd passwd lookups that ran an NSS module job (or a cached proxy lookup)")                 \
    X(nscd_passwd_proxied, "nscd passwd lookups proxied through the daemon's NSS calls, uncached") \
    X(nscd_passwd_declined, "nscd passwd lookups declined (not served here)")                      \
    X(nscd_group_hits, "nscd group lookups answered from the files or the cache, no NSS call")     \
    X(nscd_group_misses,                                                                           \
      "nscd group lookups that ran an NSS module job (or a cached proxy lookup)")                  \
    X(nscd_group_proxied, "nscd group lookups proxied through the daemon's NSS calls, uncached")   \
    X(nscd_group_declined, "nscd group lookups declined (not served here)")                        \
    X(nscd_services_hits,                                                                          \
      "nscd services lookups answered from the files or the cache, no NSS call")                   \
    X(nscd_services_misses,                                                                        \
      "nscd services lookups that ran an NSS module job (or a cached proxy lookup)")               \
    X(nscd_services_proxied,                                                                       \
      "nscd services lookups proxied through the daemon's NSS calls, uncached")                    \
    X(nscd_services_declined, "nscd services lookups declined (not served here)")                  \
    X(nscd_netgroup_declined, "nscd netgroup lookups declined (not served here)")                  \
    X(nscd_jobs_coalesced, "nscd lookups that joined an identical NSS job in flight")              \
    X(nscd_jobs_timed_out, "nscd clients closed unanswered: their NSS job ran past 2.5 s")         \
    X(nscd_jobs_unavailable,                                                                       \
      "nscd lookups a source could not answer (TRYAGAIN/UNAVAIL): no reply")                       \
    X(shared_lookups, "cache misses looked up in the shared tier (Redis)")                         \
    X(shared_hits, "misses answered from the shared tier, with no upstream query")                 \
    X(shared_misses, "shared-tier lookups that found nothing usable (absent or expired)")          \
    X(shared_timeouts, "shared-tier requests that got no reply within shared-cache.timeout")       \
    X(shared_errors, "shared-tier requests that failed: connection lost, error reply")             \
    X(shared_abandoned, "shared-tier requests failed by a connection nscache dropped (a timeout)") \
    X(shared_invalid, "shared-tier values dropped: malformed, oversized, other question")          \
    X(shared_skipped, "misses that went upstream without asking: tier down or full")               \
    X(shared_redirects, "Redis Cluster MOVED and ASK redirections followed")                       \
    X(shared_writes, "answers written to the shared tier")                                         \
    X(shared_writes_dropped, "answers not written: tier down or full")                             \
    X(doh_connections, "DNS over HTTPS connections accepted")                                      \
    X(doh_rejected, "DNS over HTTPS connections refused: allow list or connection caps")           \
    X(doh_handshakes, "TLS handshakes completed on DNS over HTTPS listeners")                      \
    X(doh_resumed, "DNS over HTTPS handshakes that resumed an earlier session")                    \
    X(doh_handshake_failures, "DNS over HTTPS handshakes that failed or did not finish in time")   \
    X(doh_http1, "DNS over HTTPS connections without HTTP/2, answered 505 and closed")             \
    X(doh_streams, "HTTP/2 requests received on DNS over HTTPS listeners")                         \
    X(doh_status_200, "DNS over HTTPS answers with HTTP status 200")                               \
    X(doh_status_400, "DNS over HTTPS answers with HTTP status 400 (not a DNS query)")             \
    X(doh_status_404, "DNS over HTTPS answers with HTTP status 404 (another path)")                \
    X(doh_status_405, "DNS over HTTPS answers with HTTP status 405 (another method)")              \
    X(doh_status_413, "DNS over HTTPS answers with HTTP status 413 (a query over 65535 bytes)")    \
    X(doh_status_415, "DNS over HTTPS answers with HTTP status 415 (another content type)")        \
    X(doh_status_other, "DNS over HTTPS answers with another HTTP status (414, 503)")              \
    X(doh_streams_timed_out, "DNS over HTTPS requests reset: not complete within read-timeout")    \
    X(doh_abuse_closed,                                                                            \
      "DNS over HTTPS connections closed with ENHANCE_YOUR_CALM: floods, resets, header bombs")

// X(name, help): levels now, not totals since start. Each is written (stored, not bumped) by
// the one thread that owns what it measures; the other blocks keep 0, so the sum is the level.
#define NSCACHE_WORKER_GAUGES(X)                                                                  \
    X(nscd_map_records, "records in the nscd map now")                                            \
    X(nscd_passwd_map_records, "records in the nscd passwd map now")                              \
    X(nscd_passwd_plan,                                                                           \
      "nscd passwd: 0 declined, 1 proxied, 2 files only, 3 files then modules (auto), 4-6 the "   \
      "same, cached")                                                                             \
    X(nscd_group_map_records, "records in the nscd group map now")                                \
    X(nscd_group_plan,                                                                            \
      "nscd group: 0 declined, 1 proxied, 2 files only, 3 files then modules (auto), 4-6 the "    \
      "same, cached")                                                                             \
    X(nscd_services_map_records, "records in the nscd services map now")                          \
    X(nscd_services_plan,                                                                         \
      "nscd services: 0 declined, 1 proxied, 2 files only, 3 files then modules (auto), 4-6 the " \
      "same, cached")                                                                             \
    X(nscd_refresh_timers, "nscd prefetch timers pending now (at most one per record in the map)")

// The nscd_<db>_plan gauges' codes (nscd::UserDatabases::plan_code) by name: the stats text
// prints the name, JSON and Prometheus keep the code.
inline constexpr const char* kNscdPlanNames[] = {"decline",
                                                 "proxy",
                                                 "files_only",
                                                 "files_then_modules",
                                                 "cached_proxy",
                                                 "cache_files_only",
                                                 "cache_files_then_modules"};
inline const char* nscd_plan_name(uint64_t code) {
    return code < sizeof kNscdPlanNames / sizeof kNscdPlanNames[0] ? kNscdPlanNames[code]
                                                                   : "unknown";
}

// The shared tier's state, for stats (sharedcache::TierHealth).
enum class SharedTierState : uint8_t { Off = 0, Up = 1, Degraded = 2, Down = 3 };

struct alignas(64) WorkerCounters {
#define NSCACHE_DECLARE_COUNTER(name, help) std::atomic<uint64_t> name{0};
    NSCACHE_WORKER_COUNTERS(NSCACHE_DECLARE_COUNTER)
    NSCACHE_WORKER_GAUGES(NSCACHE_DECLARE_COUNTER)
#undef NSCACHE_DECLARE_COUNTER
    // Answer latency by source (common/latency_histogram.h). The cache's stays empty: a hit is
    // answered in the loop turn that read it, so readers count cache_hits at zero latency
    // instead of the hit path writing a bucket.
    LatencyHistogram latency[kAnswerSources];
    // How long shared-tier lookups that got a reply waited for it.
    LatencyHistogram shared_latency;
    // The owning loop's clock (monotonic ms) at its last heartbeat (common/readiness.h); 0
    // until it first runs. No stat: /health reads it.
    std::atomic<uint64_t> heartbeat_ms{0};
};

// Single-writer level (NSCACHE_WORKER_GAUGES).
inline void set_level(std::atomic<uint64_t>& gauge, uint64_t value) {
    gauge.store(value, std::memory_order_relaxed);
}

// Single-writer increment: a plain load and store, no locked instruction.
inline void bump(std::atomic<uint64_t>& counter, uint64_t by = 1) {
    counter.store(counter.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
}

}  // namespace nscache
