// Constructors of multi-file states shared by the files that step them (multi_states.cpp,
// multi_numbers.cpp, multi_paths.cpp).
#pragma once

#include "multi_states.h"

namespace cad::program {

// The segment of a path being read (MState::matched in a Path state): empty, "." (1), ".."
// (2) or a name, which alone may end the path or be followed by "/".
constexpr uint8_t kSegmentEmpty = 0, kSegmentName = 3;

inline MState number_in(const MState& from, Field field, uint32_t file) {
    MState state;
    state.mode = MMode::Number;
    state.scope = from.scope;
    state.own = from.own;
    state.field = field;
    state.file = file;
    return state;
}

// The state after a number or a path: ``literal`` must follow, the finished numbers kept.
inline MState literal_in(const MState& from, MLiteral literal) {
    MState state = from;
    state.mode = MMode::Literal;
    state.literal = literal;
    state.length = 0;
    state.digit_count = 0;
    state.digits = 0;
    return state;
}

inline bool is_file_field(Field field) { return field != Field::Lines && field != Field::Span; }

}  // namespace cad::program
