// Lookahead sets of the LR builders: a bit per byte atom and one for end of input, in as many
// 64-bit words as the grammar's atoms need (at most 257 bits; a schema's grammar has about 45
// atoms, so one word).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace cad::cfg {

template <size_t Words>
using Lookahead = std::array<uint64_t, Words>;

template <size_t Words>
void add(Lookahead<Words>& set, int32_t bit) {
    set[bit >> 6] |= uint64_t{1} << (bit & 63);
}

template <size_t Words>
bool has(const Lookahead<Words>& set, int32_t bit) {
    return set[bit >> 6] >> (bit & 63) & 1;
}

// ``into |= from``; whether ``into`` grew.
template <size_t Words>
bool merge(Lookahead<Words>& into, const Lookahead<Words>& from) {
    bool grew = false;
    for (size_t i = 0; i < into.size(); ++i) {
        const uint64_t fresh = from[i] & ~into[i];
        if (fresh) {
            into[i] |= fresh;
            grew = true;
        }
    }
    return grew;
}

// Whether the two sets share a bit.
template <size_t Words>
bool meet(const Lookahead<Words>& a, const Lookahead<Words>& b) {
    for (size_t i = 0; i < a.size(); ++i) {
        if (a[i] & b[i]) return true;
    }
    return false;
}

template <size_t Words, class Visit>
void for_each_bit(const Lookahead<Words>& set, Visit visit) {
    for (size_t word = 0; word < set.size(); ++word) {
        for (uint64_t bits = set[word]; bits; bits &= bits - 1) {
            visit(static_cast<int32_t>(word * 64 + __builtin_ctzll(bits)));
        }
    }
}

}  // namespace cad::cfg
