// N-grams of token sequences (n <= 4) for the drafters: where they occur.
//
// ``NgramKey`` packs up to four token ids and ``n`` into 17 bytes; ``NgramChains`` maps a key
// to the occurrences of its n-gram in a growing sequence, newest first, as a linked list
// through one entries vector (open addressing, no allocation per occurrence once grown);
// ``SortedNgrams`` indexes a fixed sequence by sorting its start positions by n-gram, so the
// occurrences of an n-gram are one contiguous, ascending run found by binary search.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

namespace cad::drafting {

constexpr int kMaxNgram = 4;

struct NgramKey {
    std::array<int32_t, kMaxNgram> tokens{};
    int32_t n = 0;

    static NgramKey of(const int32_t* first, int32_t n) {
        NgramKey key;
        key.n = n;
        std::copy(first, first + n, key.tokens.begin());
        return key;
    }
    bool operator==(const NgramKey& other) const {
        return n == other.n && tokens == other.tokens;
    }
    uint64_t hash() const {
        uint64_t h = 0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(n + 1);
        for (int i = 0; i < n; ++i) {
            h ^= static_cast<uint32_t>(tokens[i]);
            h *= 0xFF51AFD7ED558CCDULL;
            h ^= h >> 29;
        }
        return h;
    }
};

// Key -> the newest occurrence (its start), each occurrence linking to the one before.
class NgramChains {
  public:
    static constexpr int32_t kNone = -1;

    NgramChains() : heads_(256) {}

    void add(const NgramKey& key, int32_t start) {
        if (2 * (count_ + 1) > heads_.size()) grow();
        Head& head = heads_[locate(key)];
        if (!head.used) {
            head.used = true;
            head.key = key;
            head.newest = kNone;
            head.oldest = start;
            ++count_;
        }
        entries_.push_back({start, head.newest});
        head.newest = static_cast<int32_t>(entries_.size() - 1);
    }
    // The first entry of ``key``'s chain (kNone if absent); walk with start()/older().
    int32_t newest(const NgramKey& key) const {
        const Head& head = heads_[locate(key)];
        return head.used ? head.newest : kNone;
    }
    // The first occurrence of ``key`` (its start), kNone if absent.
    int32_t oldest(const NgramKey& key) const {
        const Head& head = heads_[locate(key)];
        return head.used ? head.oldest : kNone;
    }
    int32_t start(int32_t entry) const { return entries_[entry].start; }
    int32_t older(int32_t entry) const { return entries_[entry].older; }

  private:
    struct Head {
        NgramKey key;
        int32_t newest = kNone;
        int32_t oldest = kNone;
        bool used = false;
    };
    struct Entry {
        int32_t start;
        int32_t older;
    };
    // The slot of ``key``, or the empty slot where it would go.
    size_t locate(const NgramKey& key) const {
        const size_t mask = heads_.size() - 1;
        for (size_t at = key.hash() & mask;; at = (at + 1) & mask) {
            const Head& head = heads_[at];
            if (!head.used || head.key == key) return at;
        }
    }
    void grow() {
        std::vector<Head> old(2 * heads_.size());
        old.swap(heads_);
        for (const Head& head : old) {
            if (head.used) heads_[locate(head.key)] = head;
        }
    }

    std::vector<Head> heads_;
    std::vector<Entry> entries_;
    size_t count_ = 0;
};

// The start positions of every n-gram (n in [low, high]) of a fixed sequence, grouped by
// n-gram and ascending within a group.
class SortedNgrams {
  public:
    SortedNgrams() = default;
    SortedNgrams(const std::vector<int32_t>& sequence, int32_t low, int32_t high)
        : by_n_(static_cast<size_t>(high) + 1) {
        const int32_t size = static_cast<int32_t>(sequence.size());
        for (int32_t n = low; n <= high; ++n) {
            std::vector<int32_t>& starts = by_n_[static_cast<size_t>(n)];
            for (int32_t start = 0; start + n <= size; ++start) starts.push_back(start);
            const int32_t* data = sequence.data();
            std::stable_sort(starts.begin(), starts.end(), [data, n](int32_t a, int32_t b) {
                return std::lexicographical_compare(data + a, data + a + n, data + b, data + b + n);
            });
        }
    }
    // The ascending starts of the n-gram ``gram`` (``n`` tokens) in ``data`` (the indexed
    // sequence), as a [first, last) range.
    std::pair<const int32_t*, const int32_t*> find(const int32_t* data, const int32_t* gram,
                                                   int32_t n) const {
        if (static_cast<size_t>(n) >= by_n_.size() || by_n_[static_cast<size_t>(n)].empty()) {
            return {nullptr, nullptr};
        }
        const std::vector<int32_t>& starts = by_n_[static_cast<size_t>(n)];
        auto lower = std::lower_bound(starts.begin(), starts.end(), gram,
                                      [data, n](int32_t start, const int32_t* key) {
                                          return std::lexicographical_compare(
                                              data + start, data + start + n, key, key + n);
                                      });
        auto upper = std::upper_bound(lower, starts.end(), gram,
                                      [data, n](const int32_t* key, int32_t start) {
                                          return std::lexicographical_compare(
                                              key, key + n, data + start, data + start + n);
                                      });
        return {starts.data() + (lower - starts.begin()), starts.data() + (upper - starts.begin())};
    }

  private:
    std::vector<std::vector<int32_t>> by_n_;
};

}  // namespace cad::drafting
