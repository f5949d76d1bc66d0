// SPDX-License-Identifier: BSD-3-Clause
// SlotTable<T>: objects addressed by ids that carry a generation, so an id kept after its
// object was removed finds nothing: a late upstream answer for a client that was answered
// otherwise, an epoll event for a handler removed in the same batch, a pending answer for a
// TCP connection that closed. One type for every such table in the daemon.
//
// Guarantees
// - add, find and remove are O(1); freed slots are reused (LIFO), so the table is as large as
//   its peak population, never larger than `capacity`.
// - Values never move (std::deque): a pointer from add() or find() stays valid until that
//   value is removed.
// - Not thread-safe: a table belongs to one thread (an event loop's).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <vector>

namespace nscache {

template <typename T>
class SlotTable {
  public:
    using Id = uint64_t;  // generation << 32 | slot index

    explicit SlotTable(size_t capacity = std::numeric_limits<uint32_t>::max())
        : capacity_(capacity) {}

    // A slot holding a default-constructed T, and its id; nullptr when the table is full.
    T* add(Id& id) {
        id = ~Id{0};  // never a valid id (and no "maybe uninitialized" for callers)
        uint32_t index;
        if (!free_.empty()) {
            index = free_.back();
            free_.pop_back();
        } else if (slots_.size() < capacity_) {
            index = static_cast<uint32_t>(slots_.size());
            slots_.emplace_back();
        } else {
            return nullptr;
        }
        Slot& s = slots_[index];
        s.in_use = true;
        ++used_;
        id = Id{s.generation} << 32 | index;
        return &s.value;
    }

    // The value behind `id`, or nullptr when it was removed (or never existed).
    T* find(Id id) {
        const auto index = static_cast<uint32_t>(id);
        if (index >= slots_.size()) return nullptr;
        Slot& s = slots_[index];
        if (!s.in_use || s.generation != static_cast<uint32_t>(id >> 32)) return nullptr;
        return &s.value;
    }

    // Destroys the value (the slot gets a fresh T) and retires the id. False for a stale id.
    bool remove(Id id) {
        if (find(id) == nullptr) return false;
        const auto index = static_cast<uint32_t>(id);
        Slot& s = slots_[index];
        s.value = T{};
        s.in_use = false;
        ++s.generation;
        --used_;
        free_.push_back(index);
        return true;
    }

    size_t size() const { return used_; }

    // Calls f(id, value) for every value in the table. `f` must not add or remove.
    template <typename F>
    void for_each(F&& f) {
        for (size_t i = 0; i < slots_.size(); ++i) {
            Slot& s = slots_[i];
            if (s.in_use) f(Id{s.generation} << 32 | i, s.value);
        }
    }

    // Removes everything (ids handed out before stay stale).
    void clear() {
        for (size_t i = 0; i < slots_.size(); ++i) {
            if (slots_[i].in_use) remove(Id{slots_[i].generation} << 32 | i);
        }
    }

  private:
    struct Slot {
        T value{};
        uint32_t generation = 0;
        bool in_use = false;
    };

    const size_t capacity_;
    std::deque<Slot> slots_;
    std::vector<uint32_t> free_;
    size_t used_ = 0;
};

}  // namespace nscache
