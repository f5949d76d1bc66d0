// SPDX-License-Identifier: BSD-3-Clause
// glibc's nscd protocol and the layout of its shared map, as the glibc client reads them
// (nscd/nscd-client.h; research/nscd-protocol.md has the reading, with citations). These are
// our own declarations of that ABI: every size and offset glibc relies on is pinned below by
// a static_assert, so a change here that would break the client fails to build. The layout
// is the same from glibc 2.28 to 2.42 (NSCD_VERSION 2, DB_VERSION 2). x86_64 and other LP64
// Linux targets; nscd_ssize_t is int64 on alpha only, which is not supported.
#pragma once

#include <cstddef>
#include <cstdint>

namespace nscache::nscd {

inline constexpr int32_t kProtocolVersion = 2;      // NSCD_VERSION
inline constexpr int32_t kDbVersion = 2;            // DB_VERSION
inline constexpr uint32_t kEndRef = 0xFFFFFFFFu;    // ENDREF
inline constexpr size_t kAlign = 16;                // the bucket array is padded to this
inline constexpr size_t kBlockAlign = 8;            // every record and hash entry
inline constexpr size_t kMaxKeyLen = 1024;          // MAXKEYLEN: the client sends no longer key
inline constexpr uint32_t kMappingTimeout = 300;    // MAPPING_TIMEOUT, seconds
inline constexpr uint64_t kClientTimeoutMs = 5000;  // the client waits this long for a reply

// glibc's request_type.
enum RequestType : int32_t {
    GETPWBYNAME = 0,
    GETPWBYUID = 1,
    GETGRBYNAME = 2,
    GETGRBYGID = 3,
    GETHOSTBYNAME = 4,
    GETHOSTBYNAMEv6 = 5,
    GETHOSTBYADDR = 6,
    GETHOSTBYADDRv6 = 7,
    SHUTDOWN = 8,
    GETSTAT = 9,
    INVALIDATE = 10,
    GETFDPW = 11,
    GETFDGR = 12,
    GETFDHST = 13,
    GETAI = 14,
    INITGROUPS = 15,
    GETSERVBYNAME = 16,
    GETSERVBYPORT = 17,
    GETFDSERV = 18,
    GETNETGRENT = 19,
    INNETGR = 20,
    GETFDNETGR = 21,
    LASTREQ = 22,
};

// h_errno values the client stores from a negative host reply.
inline constexpr int32_t kHostNotFound = 1;  // HOST_NOT_FOUND
inline constexpr int32_t kTryAgain = 2;      // TRY_AGAIN
inline constexpr int32_t kNoData = 4;        // NO_DATA
inline constexpr int32_t kNetdbInternal = -1;

struct RequestHeader {
    int32_t version;
    int32_t type;     // RequestType
    int32_t key_len;  // bytes of key that follow (a string key counts its NUL)
};

// found: 1 data follows; 0 authoritative negative (error = h_errno); -1 "not served here":
// the client turns nscd off for this database for its next 100 calls and asks NSS itself.
struct HostResponseHeader {
    int32_t version;
    int32_t found;
    int32_t h_name_len;  // including the NUL
    int32_t h_aliases_cnt;
    int32_t h_addrtype;
    int32_t h_length;
    int32_t h_addr_list_cnt;
    int32_t error;
};
// Then: h_name, uint32 alias lengths[h_aliases_cnt], addresses[h_addr_list_cnt][h_length],
// the alias strings (each with its NUL).

struct AiResponseHeader {
    int32_t version;
    int32_t found;
    int32_t naddrs;
    int32_t addrslen;  // bytes of addresses: 4 per IPv4, 16 per IPv6
    int32_t canonlen;  // including the NUL; 0: none
    int32_t error;     // ignored by getaddrinfo: found 0 is EAI_NONAME
};
// Then: the addresses packed, uint8 family[naddrs], the canonical name.

struct PwResponseHeader {
    int32_t version;
    int32_t found;
    int32_t pw_name_len;
    int32_t pw_passwd_len;
    uint32_t pw_uid;
    uint32_t pw_gid;
    int32_t pw_gecos_len;
    int32_t pw_dir_len;
    int32_t pw_shell_len;
};

struct GrResponseHeader {
    int32_t version;
    int32_t found;
    int32_t gr_name_len;
    int32_t gr_passwd_len;
    uint32_t gr_gid;
    int32_t gr_mem_cnt;
};

struct InitgrResponseHeader {
    int32_t version;
    int32_t found;
    int32_t ngrps;
};

struct ServResponseHeader {
    int32_t version;
    int32_t found;
    int32_t s_name_len;
    int32_t s_proto_len;
    int32_t s_aliases_cnt;
    int32_t s_port;
};

struct NetgroupResponseHeader {
    int32_t version;
    int32_t found;
    int32_t nresults;
    int32_t result_len;
};

struct InnetgroupResponseHeader {
    int32_t version;
    int32_t found;
    int32_t result;
};

// The head of the shared map (struct database_pers_head).
struct MapHead {
    int32_t version;      // kDbVersion
    int32_t header_size;  // sizeof(MapHead)
    int32_t gc_cycle;     // odd while the writer moves data: readers use the socket
    int32_t nscd_certainly_running;
    uint64_t timestamp;      // time(): a map with !certainly_running and timestamp + 300 < now is
                             // stale and the client asks for a new one
    uint32_t extra_data[4];  // [0]: the netlink change counter (__check_pf)
    int32_t module;          // buckets
    int32_t data_size;       // bytes of the data area
    int32_t first_free;
    int32_t nentries;
    int32_t maxnentries;
    int32_t maxnsearched;
    uint64_t poshit, neghit, posmiss, negmiss, rdlockdelayed, wrlockdelayed, addfailed;
    // uint32 bucket heads[module] follow, padded to kAlign, then the data area.
};

// One key in a bucket's chain (struct hashentry). Readers see the first 28 bytes only.
struct HashEntry {
    uint8_t type;  // RequestType of the key
    uint8_t first;
    uint8_t padding[2];
    int32_t len;      // key length
    uint32_t key;     // data offset of the key bytes
    int32_t owner;    // ignored by the client
    uint32_t next;    // data offset of the next entry, or kEndRef
    uint32_t packet;  // data offset of the DataHead
    uint64_t unused;  // nscd's private list pointer
};

// The head of one record (struct datahead); the response header and payload follow.
struct DataHead {
    int32_t allocsize;  // the whole block: head, response, payload and key copy
    int32_t recsize;    // response header plus payload
    uint64_t timeout;   // absolute expiry (time()); the client never reads it
    uint8_t notfound;
    uint8_t nreloads;
    uint8_t usable;  // the client returns the record only while this is non-zero
    uint8_t unused;
    uint32_t ttl;
};

static_assert(sizeof(RequestHeader) == 12);
static_assert(sizeof(HostResponseHeader) == 32);
static_assert(sizeof(AiResponseHeader) == 24);
static_assert(sizeof(PwResponseHeader) == 36);
static_assert(sizeof(GrResponseHeader) == 24);
static_assert(sizeof(InitgrResponseHeader) == 12);
static_assert(sizeof(ServResponseHeader) == 24);
static_assert(sizeof(NetgroupResponseHeader) == 16);
static_assert(sizeof(InnetgroupResponseHeader) == 12);
static_assert(sizeof(MapHead) == 120);
static_assert(offsetof(MapHead, gc_cycle) == 8);
static_assert(offsetof(MapHead, timestamp) == 16);
static_assert(offsetof(MapHead, extra_data) == 24);
static_assert(offsetof(MapHead, module) == 40);
static_assert(offsetof(MapHead, data_size) == 44);
static_assert(sizeof(HashEntry) == 32);
static_assert(offsetof(HashEntry, len) == 4);
static_assert(offsetof(HashEntry, key) == 8);
static_assert(offsetof(HashEntry, next) == 16);
static_assert(offsetof(HashEntry, packet) == 20);
static_assert(sizeof(DataHead) == 24);
static_assert(offsetof(DataHead, usable) == 18);

// glibc's __nss_hash (sdbm): both sides must pick the same bucket.
inline uint32_t key_hash(const uint8_t* key, size_t len) {
    uint32_t h = 0;
    for (size_t i = 0; i < len; ++i) h = key[i] + 65599u * h;
    return h;
}

inline size_t round_up(size_t n, size_t to) {
    return (n + to - 1) / to * to;
}

}  // namespace nscache::nscd
