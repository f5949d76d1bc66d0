// The daemon's side of the NSS shared map (nss/protocol.h): a file in /run/nscache mapped
// read-write here and read-only by every process that resolves names through the module.
// Each slot is written under its seqlock, so readers never accept a half-written slot.
// Single writer: publish() is called only from the NSS thread; invalidate_all() may be
// called from any thread (one atomic increment).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "nss/protocol.h"

namespace nscache::server {

class HostsMap {
  public:
    static constexpr uint32_t kDefaultSlots = 16384;  // 16 MiB of 1 KiB slots

    HostsMap() = default;
    ~HostsMap();
    HostsMap(const HostsMap&) = delete;
    HostsMap& operator=(const HostsMap&) = delete;

    // Creates the file afresh (readers of an older file see it closed and reopen the path).
    std::optional<std::string> create(const std::string& path, uint32_t slots = kDefaultSlots);

    // The generation to publish an answer under: read it before the answer is looked up, so
    // an answer looked up before a flush is published already invalid (any thread).
    uint32_t generation() const;

    // Stores an answer for `key` valid until now_ms + ttl (CLOCK_MONOTONIC), tagged with
    // `generation` (from generation()); skipped when it does not fit in a slot. The key's own
    // slot, else the one of its two that expires first, is replaced.
    void publish(std::span<const uint8_t> key, uint16_t status, uint32_t ttl,
                 std::span<const uint8_t> payload, int64_t now_ms, uint32_t generation);

    // Every slot written so far, and every answer looked up before now, becomes invalid (a
    // flush).
    void invalidate_all();

    // Marks the map closed and removes the file.
    void close();

  private:
    nscache_map_slot* slot(uint32_t index) const;

    std::string path_;
    void* base_ = nullptr;
    size_t size_ = 0;
    uint32_t slot_count_ = 0;
};

}  // namespace nscache::server
