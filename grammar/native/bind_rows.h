// Helpers the bindings share: bitmask rows handed over from Python as raw addresses.
#pragma once

#include <pybind11/pybind11.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "bitmask.h"
#include "matcher.h"

namespace cad {

// Fill a row of ``words`` int32 words at ``address`` (a CPU tensor's data pointer checked by
// the Python caller): the matcher's bits, then zeros for words past its vocabulary.
inline void fill_row_at(NativeMatcher& matcher, uintptr_t address, size_t words) {
    const size_t own = bitmask_words(matcher.vocab_size());
    if (words < own) {
        throw std::invalid_argument("the bitmask row has " + std::to_string(words) +
                                    " words but the vocabulary needs " + std::to_string(own));
    }
    auto* row = reinterpret_cast<uint32_t*>(address);
    matcher.fill_bitmask(row);
    std::memset(row + own, 0, (words - own) * sizeof(uint32_t));
}

// Write the allowed tokens as one byte (0 or 1) per token at ``address``.
inline void fill_bools_at(NativeMatcher& matcher, uintptr_t address) {
    const int32_t vocab = matcher.vocab_size();
    std::vector<uint32_t> row(bitmask_words(vocab));
    matcher.fill_bitmask(row.data());
    auto* out = reinterpret_cast<uint8_t*>(address);
    const auto* packed = reinterpret_cast<const uint8_t*>(row.data());
    const int32_t whole = vocab / 8;
    static const std::array<uint64_t, 256> spread = [] {
        // The 8 bits of a byte spread over 8 bytes: bit k becomes byte k (little-endian).
        std::array<uint64_t, 256> table{};
        for (int byte = 0; byte < 256; ++byte) {
            for (int bit = 0; bit < 8; ++bit) {
                if (byte >> bit & 1) table[byte] |= uint64_t{1} << (8 * bit);
            }
        }
        return table;
    }();
    for (int32_t i = 0; i < whole; ++i) std::memcpy(out + 8 * i, &spread[packed[i]], 8);
    for (int32_t token = whole * 8; token < vocab; ++token) out[token] = has_token(row.data(), token);
}

void bind_vocabulary(pybind11::module_& m);
void bind_program(pybind11::module_& m);
void bind_batch(pybind11::module_& m);
void bind_cfg(pybind11::module_& m);
void bind_lowering(pybind11::module_& m);

}  // namespace cad
