// 64-bit FNV-1a with the standard offset basis and prime: the one hash the native core writes
// out, over byte strings (token-table fingerprints, index checksums, paths) and over the int
// keys of its interning tables.
#pragma once

#include <cstdint>
#include <string_view>

namespace cad::fnv1a {

constexpr uint64_t kOffsetBasis = 14695981039346656037ULL;
constexpr uint64_t kPrime = 1099511628211ULL;

// ``hash`` after one more byte.
constexpr uint64_t byte(uint64_t hash, uint8_t value) { return (hash ^ value) * kPrime; }

// ``hash`` after the bytes of ``data``.
inline uint64_t bytes(uint64_t hash, std::string_view data) {
    for (const char c : data) hash = byte(hash, static_cast<uint8_t>(c));
    return hash;
}

// ``hash`` after the 8 bytes of ``value``, least significant first.
constexpr uint64_t word_bytes(uint64_t hash, uint64_t value) {
    for (int shift = 0; shift < 64; shift += 8) hash = byte(hash, static_cast<uint8_t>(value >> shift));
    return hash;
}

// ``hash`` after ``value`` taken as one symbol rather than byte by byte: a key of several
// ints costs one multiplication per int (the interning tables' hash).
constexpr uint64_t symbol(uint64_t hash, uint64_t value) { return (hash ^ value) * kPrime; }

}  // namespace cad::fnv1a
