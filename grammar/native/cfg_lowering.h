// Lowering of named grammar expressions into the byte-level Grammar, and the clean-up every
// engine expects before it is built (the native form of ``grammar_ir.lower`` followed by
// ``transforms.simplify``; the Python pair is the reference of the differential tests).
//
// Lowering: literals become one terminal per UTF-8 byte, character classes UTF-8 byte-class
// sequences, nested choices and repetitions helper rules shared when their bodies are equal
// (``h ::= ε | h x``: left-recursive). Symbols written out are counted, and past the budget
// lowering stops before a counted repetition is written out. Clean-up: productions that
// derive nothing or that the start cannot reach go, and so do nonterminals whose only
// production is empty; what is left is renumbered in order.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "cfg_grammar.h"

namespace cad::cfg {

enum class ExprKind : uint8_t { Literal, CharClass, RuleRef, Sequence, Choice, Repeat };

// One expression of a rule set. Which fields are used depends on the kind: ``begin``/``end``
// index the text (Literal), the ranges (CharClass) or the children (Sequence, Choice) of the
// owning ``RuleExprs``; ``target`` is the rule id (RuleRef) or the body (Repeat).
struct ExprNode {
    ExprKind kind = ExprKind::Sequence;
    bool negated = false;
    int32_t begin = 0;
    int32_t end = 0;
    int32_t target = 0;
    int64_t low = 0;
    int64_t high = -1;  // Repeat: -1 is unbounded
};

// Named rules as expression nodes. Rule ``i`` is named ``names[i]`` and its expression is
// node ``roots[i]``; rule 0 is the start. A node may be shared by several parents: it is
// lowered at every use, as the Python lowering does (the symbols counted are the same).
struct RuleExprs {
    std::vector<std::string> names;
    std::vector<int32_t> roots;
    std::vector<ExprNode> nodes;
    std::string text;                                // UTF-8 bytes of every literal
    std::vector<std::pair<int32_t, int32_t>> ranges;  // inclusive code point ranges
    std::vector<int32_t> children;
};

// A grammar that cannot be lowered (too many symbols) or derives nothing, with the message
// ``GrammarError`` carries.
class LoweringError : public std::runtime_error {
   public:
    using std::runtime_error::runtime_error;
};

// ``rules`` lowered with at most ``max_symbols`` symbols, then cleaned up (the grammar's
// names are the rules', moved, not copied).
Grammar lower_and_simplify(RuleExprs rules, int64_t max_symbols);

// ``grammar`` without useless, unreachable and empty-only rules, renumbered; throws
// LoweringError when the start derives no string.
Grammar simplify(Grammar grammar);

}  // namespace cad::cfg
