// A UTF-8 validator one byte at a time, shared by the program FSM and the token slices.
#pragma once

#include <array>
#include <cstdint>

namespace cad {

// Validator states: 0 a character boundary; 1-3 that many continuation bytes to come; 4-7 the
// restricted second bytes after E0, ED, F0, F4.
struct Utf8Continuation {
    uint8_t low, high, then;
};
constexpr std::array<Utf8Continuation, 8> kUtf8Continuation = {{{0, 0, 0},
                                                                {0x80, 0xBF, 0},
                                                                {0x80, 0xBF, 1},
                                                                {0x80, 0xBF, 2},
                                                                {0xA0, 0xBF, 1},
                                                                {0x80, 0x9F, 1},
                                                                {0x90, 0xBF, 2},
                                                                {0x80, 0x8F, 2}}};
constexpr int kUtf8Invalid = -1;

// The validator state after ``byte`` from ``pending``, or kUtf8Invalid.
inline int utf8_next(uint8_t pending, uint8_t byte) {
    if (pending == 0) {
        if (byte < 0x80) return 0;
        if (byte >= 0xC2 && byte <= 0xDF) return 1;
        if (byte == 0xE0) return 4;
        if (byte == 0xED) return 5;
        if (byte >= 0xE1 && byte <= 0xEF) return 2;
        if (byte == 0xF0) return 6;
        if (byte >= 0xF1 && byte <= 0xF3) return 3;
        if (byte == 0xF4) return 7;
        return kUtf8Invalid;
    }
    const Utf8Continuation& rule = kUtf8Continuation[pending];
    return byte >= rule.low && byte <= rule.high ? rule.then : kUtf8Invalid;
}

}  // namespace cad
