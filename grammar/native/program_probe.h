// What program bytes add to the resolved text, for program mode under a syntax constraint
// (``cad.grammar.syntax.program``): the program matcher's structure walks the bytes from its
// current state without taking them, and says which resolved text they decide, in order.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "program_matcher.h"
#include "program_states.h"

namespace cad::program {

// A piece of resolved text: the decided (unescaped) bytes of a gen body, or a copy that ended
// (its kind and numbers; the caller owns the document).
struct ResolvedPiece {
    bool is_copy;
    std::string text;
    Kind kind;
    std::array<uint64_t, 4> values;
};

// The outcome of walking bytes from a matcher's state: the state after them, the resolved
// pieces in order, and in a gen body how much of it is decided (``definite``, a length) and
// the undecided rest (``held``: bytes that may still become ``</gen>`` or its escape).
struct Probe {
    State state;
    std::vector<ResolvedPiece> pieces;
    uint32_t definite;
    std::string held;
};

// How many bytes at the end of a gen body are undecided: a ``<`` followed by backslashes and
// a proper prefix of ``/gen>`` (64 bytes at most).
size_t held_length(std::string_view body);

// ``data`` walked from ``matcher``'s state, or nothing if the program structure forbids it
// (unless ``cross_ops``, no byte may follow the newline that ends an op). ``definite``: how
// much of the gen body in progress was decided before.
std::optional<Probe> probe(const ProgramMatcher& matcher, std::string_view data, bool cross_ops,
                           uint32_t definite);

}  // namespace cad::program
