// The byte-level context-free grammar both engines consume (the native form of
// ``cad.grammar.cfg.grammar_ir.Grammar``), its byte atoms and its dotted productions.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace cad::cfg {

// A set of byte values.
using ByteClass = std::array<uint64_t, 4>;

inline bool class_has(const ByteClass& bytes, int byte) { return bytes[byte >> 6] >> (byte & 63) & 1; }

// Symbols are ints: >= 0 a nonterminal, < 0 the terminal -(symbol + 1) (one byte of a class).
// Productions are flat: production p is ``lhs[p] ::= symbols[rhs_begin[p] .. rhs_begin[p + 1])``,
// so a grammar of thousands of productions is a few arrays, not a vector per production.
struct Grammar {
    std::vector<std::string> names;  // one per nonterminal
    std::vector<int32_t> lhs;        // one per production
    std::vector<int32_t> rhs_begin{0};
    std::vector<int32_t> symbols;
    std::vector<ByteClass> terminals;
    int32_t start = 0;

    size_t production_count() const { return lhs.size(); }
    const int32_t* rhs(size_t p) const { return symbols.data() + rhs_begin[p]; }
    int32_t rhs_length(size_t p) const { return rhs_begin[p + 1] - rhs_begin[p]; }
    void add_production(int32_t head, const int32_t* first, const int32_t* last) {
        lhs.push_back(head);
        symbols.insert(symbols.end(), first, last);
        rhs_begin.push_back(static_cast<int32_t>(symbols.size()));
    }
};

inline int32_t terminal_index(int32_t symbol) { return -symbol - 1; }

// The coarsest partition of the bytes in which every terminal class is a union of atoms
// (bytes every terminal treats alike share an atom: Pre3's edge aggregation). Atoms are
// numbered in order of their smallest byte; ``end_atom`` (one past the last) is end of input.
struct ByteAtoms {
    std::array<uint8_t, 256> atom_of_byte{};
    int32_t end_atom = 0;
    std::vector<std::vector<int32_t>> terminal_atoms;  // the atoms of each terminal
    std::vector<uint8_t> first_byte;                   // a byte of each atom

    explicit ByteAtoms(const std::vector<ByteClass>& terminals);
    int32_t count() const { return end_atom + 1; }  // end of input included
};

constexpr int32_t kComplete = 1 << 30;  // next_symbol of a core whose dot is at the end

// Dotted productions of the grammar augmented with ``S' ::= S``: core offset[p] + d is
// production p with the dot before position d.
struct ItemCores {
    std::vector<int32_t> next_symbol;
    std::vector<int32_t> lhs;
    std::vector<int32_t> production_of;
    // Per nonterminal (augmented start included), the first cores of its productions, in
    // production order: ``first_core_list[first_core_begin[n] .. first_core_begin[n + 1])``.
    std::vector<int32_t> first_core_begin;
    std::vector<int32_t> first_core_list;
    std::vector<bool> nullable;                     // per nonterminal, augmented start included
    std::vector<int32_t> production_lhs;            // per production, augmented one last
    std::vector<int32_t> production_length;
    int32_t start_core = 0;
    int32_t accept_core = 0;
    int32_t nonterminal_count = 0;  // augmented start included

    explicit ItemCores(const Grammar& grammar);
    int32_t augmented_production() const { return static_cast<int32_t>(production_lhs.size()) - 1; }

    // The first cores of ``nonterminal``'s productions, for a range-for.
    struct Cores {
        const int32_t* first;
        const int32_t* last;
        const int32_t* begin() const { return first; }
        const int32_t* end() const { return last; }
    };
    Cores first_cores(int32_t nonterminal) const {
        const int32_t* list = first_core_list.data();
        return {list + first_core_begin[nonterminal], list + first_core_begin[nonterminal + 1]};
    }
};

}  // namespace cad::cfg
