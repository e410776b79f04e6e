// An index from 64-bit keys to ints for the hot paths of mask construction: open addressing
// with linear probing, kept at most half full, so a lookup is a probe or two and an insertion
// allocates only when the table doubles (node-based hash maps allocate on every insertion).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace cad {

class FlatIndex {
  public:
    static constexpr uint64_t kNoKey = ~uint64_t{0};  // the one key that cannot be stored

    explicit FlatIndex(size_t capacity = 64) : slots_(round_up(2 * capacity)) {}

    // The value under ``key``, or -1 when there is none.
    int32_t find(uint64_t key) const {
        const size_t mask = slots_.size() - 1;
        for (size_t at = slot_of(key, mask);; at = (at + 1) & mask) {
            if (slots_[at].key == key) return slots_[at].value;
            if (slots_[at].key == kNoKey) return -1;
        }
    }

    // The value under ``key`` and false, or ``value`` stored under it and true.
    std::pair<int32_t, bool> try_emplace(uint64_t key, int32_t value) {
        const size_t mask = slots_.size() - 1;
        for (size_t at = slot_of(key, mask);; at = (at + 1) & mask) {
            Slot& slot = slots_[at];
            if (slot.key == key) return {slot.value, false};
            if (slot.key == kNoKey) {
                slot = {key, value};
                if (2 * ++size_ > slots_.size()) grow();
                return {value, true};
            }
        }
    }

    // Store ``value`` under ``key``, replacing what was there.
    void assign(uint64_t key, int32_t value) {
        const size_t mask = slots_.size() - 1;
        for (size_t at = slot_of(key, mask);; at = (at + 1) & mask) {
            Slot& slot = slots_[at];
            if (slot.key == key) {
                slot.value = value;
                return;
            }
            if (slot.key == kNoKey) {
                slot = {key, value};
                if (2 * ++size_ > slots_.size()) grow();
                return;
            }
        }
    }

    size_t size() const { return size_; }

  private:
    struct Slot {
        uint64_t key = kNoKey;
        int32_t value = 0;
    };

    static size_t round_up(size_t count) {
        size_t size = 16;
        while (size < count) size *= 2;
        return size;
    }
    static size_t slot_of(uint64_t key, size_t mask) {
        return static_cast<size_t>((key * 0x9E3779B97F4A7C15ULL) >> 32) & mask;
    }
    void grow() {
        std::vector<Slot> old(2 * slots_.size());
        old.swap(slots_);
        const size_t mask = slots_.size() - 1;
        for (const Slot& slot : old) {
            if (slot.key == kNoKey) continue;
            size_t at = slot_of(slot.key, mask);
            while (slots_[at].key != kNoKey) at = (at + 1) & mask;
            slots_[at] = slot;
        }
    }

    std::vector<Slot> slots_;
    size_t size_ = 0;
};

}  // namespace cad
