// SPDX-License-Identifier: BSD-3-Clause
// The daemon's side of the NSS shared map (nss/protocol.h): a sealed memfd mapped read-write
// here, whose descriptor the NSS socket hands to every process that asks; they map it
// read-only. The map has no path: nobody can replace, truncate or write it but this mapping.
// Each slot is written under its seqlock, so readers never accept a half-written slot.
// Single writer: publish() is called only from the host front's thread; generation() and
// invalidate_all() may be called from any thread (one atomic load or increment).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "nss/protocol.h"

namespace nscache::nssd {

class HostsMap {
  public:
    static constexpr uint32_t kDefaultSlots = 16384;  // 16 MiB of 1 KiB slots

    HostsMap() = default;
    ~HostsMap();
    HostsMap(const HostsMap&) = delete;
    HostsMap& operator=(const HostsMap&) = delete;

    // Creates, maps and seals the map (NSCACHE_MAP_SEALS); an error message on failure.
    std::optional<std::string> create(uint32_t slots = kDefaultSlots);

    // The sealed descriptor to hand to readers (-1 before create()), its size in bytes and
    // the map_id written in its header.
    int fd() const { return fd_; }
    size_t size() const { return size_; }
    uint32_t id() const { return id_; }

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

    // Marks the map stopped (readers ask for a new one) and lets go of it; readers that
    // mapped it keep their mapping.
    void close();

  private:
    nscache_map_slot* slot(uint32_t index) const;

    int fd_ = -1;
    void* base_ = nullptr;
    size_t size_ = 0;
    uint32_t slot_count_ = 0;
    uint32_t id_ = 0;
};

}  // namespace nscache::nssd
