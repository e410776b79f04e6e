// LR(1) tables over byte atoms (the native form of ``cad.grammar.cfg.lr1``): LALR(1) where the
// grammar is LALR(1), canonical LR(1) where merging the lookaheads of equal cores creates a
// conflict the canonical automaton does not have.
//
// Lookahead sets are bitsets over atoms plus end of input. A conflict in both, or more than
// ``max_states`` states, throws NotLr1 and the caller runs Earley.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "cfg_grammar.h"

namespace cad::cfg {

class NotLr1 : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

// ACTION entries: >= 0 shift to that state, kReduceBase - p reduce production p.
constexpr int32_t kActionError = INT32_MIN;
constexpr int32_t kActionAccept = INT32_MIN + 1;
constexpr int32_t kReduceBase = -1;

inline bool is_reduce(int32_t action) { return action < 0 && action > kActionAccept; }
inline int32_t reduced_production(int32_t action) { return kReduceBase - action; }

struct LrTables {
    ByteAtoms atoms;
    int32_t states = 0;
    int32_t nonterminals = 0;       // augmented start included
    std::vector<int32_t> action;       // states x atoms.count()
    std::vector<int32_t> goto_row_of;  // per state, its row of goto_rows (0: no gotos)
    std::vector<int32_t> goto_rows;    // rows x nonterminals, -1 where undefined
    std::vector<int32_t> production_lhs;
    std::vector<int32_t> production_length;

    int32_t act(int32_t state, int32_t atom) const {
        return action[static_cast<size_t>(state) * atoms.count() + atom];
    }
    int32_t go(int32_t state, int32_t nonterminal) const {
        return goto_rows[static_cast<size_t>(goto_row_of[state]) * nonterminals + nonterminal];
    }
};

// LALR(1) tables if the grammar has no LALR(1) conflict, else canonical LR(1) tables.
LrTables build_lr1(const Grammar& grammar, int32_t max_states = 20000);

// LALR(1) tables (``lalr.cpp``), or nullopt at the first conflict; NotLr1 past ``max_states``.
std::optional<LrTables> build_lalr1(const Grammar& grammar, const ByteAtoms& atoms,
                                    int32_t max_states);

}  // namespace cad::cfg
