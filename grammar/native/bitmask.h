// Packed token bitmasks: one bit per token id in 32-bit words (bit j of word i is token
// 32 * i + j), the layout of ``cad.grammar.bitmask``, XGrammar and llguidance.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace cad {

inline uint32_t bitmask_words(int32_t vocab_size) {
    return static_cast<uint32_t>(vocab_size + 31) / 32;
}

inline void set_token(uint32_t* row, int32_t token) {
    row[static_cast<uint32_t>(token) >> 5] |= 1u << (static_cast<uint32_t>(token) & 31);
}

inline bool has_token(const uint32_t* row, int32_t token) {
    return (row[static_cast<uint32_t>(token) >> 5] >> (static_cast<uint32_t>(token) & 31)) & 1u;
}

// Bits [begin, end) set in ``row``.
inline void set_range(uint32_t* row, uint32_t begin, uint32_t end) {
    while (begin < end && (begin & 31)) set_token(row, static_cast<int32_t>(begin++));
    while (begin + 32 <= end) {
        row[begin >> 5] = ~0u;
        begin += 32;
    }
    while (begin < end) set_token(row, static_cast<int32_t>(begin++));
}

// The allowed ids below ``width`` of a packed bitmask row, in increasing order, written to
// ``out`` (room for ``limit``); how many there are, or -1 (``out`` then undefined) as soon as
// there are more than ``limit``.
inline int64_t allowed_ids(const uint32_t* row, size_t words, size_t width, int32_t* out,
                           size_t limit) {
    words = std::min(words, (width + 31) / 32);
    size_t count = 0;
    for (size_t word = 0; word < words; ++word) {
        for (uint32_t rest = row[word]; rest; rest &= rest - 1) {
            const size_t id = word * 32 + static_cast<size_t>(__builtin_ctz(rest));
            if (id >= width) break;
            if (count == limit) return -1;
            out[count++] = static_cast<int32_t>(id);
        }
    }
    return static_cast<int64_t>(count);
}

// The greedy choice under a packed bitmask: the lowest allowed id among the first ``width``
// of ``logits`` with the highest value, as setting every other logit to -inf and taking the
// first argmax does (a NaN logit is never chosen); -1 when no id below ``width`` is allowed.
// One pass for the highest value, with a whole allowed word compared eight lanes at a time,
// and one for its first id.
inline int32_t masked_argmax(const float* logits, size_t width, const uint32_t* row,
                             size_t words) {
    words = std::min(words, (width + 31) / 32);
    bool any = false;
    float top = 0.0f;
    const auto consider = [&](float value) {
        if (!any || value > top) top = value;
        any = any || value == value;
    };
    for (size_t word = 0; word < words; ++word) {
        const uint32_t bits = row[word];
        if (bits == 0) continue;
        const size_t base = word * 32;
        if (bits == ~0u && base + 32 <= width) {
            float lanes[8];
            std::fill(lanes, lanes + 8, -std::numeric_limits<float>::infinity());
            for (size_t at = 0; at < 32; at += 8) {
                for (size_t lane = 0; lane < 8; ++lane) {
                    const float value = logits[base + at + lane];
                    lanes[lane] = value > lanes[lane] ? value : lanes[lane];
                }
            }
            for (float value : lanes) consider(value);
            continue;
        }
        for (uint32_t rest = bits; rest; rest &= rest - 1) {
            const size_t id = base + static_cast<size_t>(__builtin_ctz(rest));
            if (id < width) consider(logits[id]);
        }
    }
    if (!any) return -1;
    for (size_t word = 0; word < words; ++word) {
        for (uint32_t rest = row[word]; rest; rest &= rest - 1) {
            const size_t id = word * 32 + static_cast<size_t>(__builtin_ctz(rest));
            if (id < width && logits[id] == top) return static_cast<int32_t>(id);
        }
    }
    return -1;
}

// A vocabulary-wide token set: a packed bitmask row of its own.
struct TokenSet {
    std::vector<uint32_t> words;

    TokenSet() = default;
    explicit TokenSet(int32_t vocab_size) : words(bitmask_words(vocab_size), 0u) {}

    void add(int32_t token) { set_token(words.data(), token); }
    bool contains(int32_t token) const { return has_token(words.data(), token); }
    void write(uint32_t* row) const {
        std::memcpy(row, words.data(), words.size() * sizeof(uint32_t));
    }
};

// A token set that is a bitmask row when large and a list of ids when small (what is cheapest
// to write into a row).
struct TokenList {
    std::vector<uint32_t> bits;  // empty when kept as ids
    std::vector<int32_t> ids;
    size_t count = 0;  // tokens in the set

    // Write the set into ``row`` (``words`` long); every other bit is cleared.
    void write(uint32_t* row, size_t words) const {
        if (!bits.empty()) {
            std::memcpy(row, bits.data(), words * sizeof(uint32_t));
            return;
        }
        std::memset(row, 0, words * sizeof(uint32_t));
        for (int32_t token : ids) set_token(row, token);
    }

    // The set of the bits of ``row`` (``words`` long) holding ``count`` tokens.
    static TokenList from_row(std::vector<uint32_t> row, size_t count) {
        TokenList list;
        list.count = count;
        if (count * 8 > row.size()) {
            list.bits = std::move(row);
            return list;
        }
        list.ids.reserve(count);
        for (size_t word = 0; word < row.size(); ++word) {
            for (uint32_t bits = row[word]; bits; bits &= bits - 1) {
                list.ids.push_back(static_cast<int32_t>(word * 32 + __builtin_ctz(bits)));
            }
        }
        return list;
    }
};

}  // namespace cad
