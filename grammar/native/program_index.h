// Everything the program FSM precomputes once per tokenizer (the compiled twin of
// ``cad.grammar.program_index``).
//
// A token's fate in most states does not depend on the document: a gen body takes any valid
// UTF-8 free of ``</gen>``, literals and op openers are fixed. Only bytes read inside a number
// do. So for every shape slot (a state with its numbers erased) the index keeps the tokens
// allowed whatever the document (a bitmask row, copied as is) and the few that read number
// bytes (walked per state); pure digit tokens are grouped by length and sorted by value, so
// the ones a number state allows are a few contiguous runs found by binary search.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "bitmask.h"
#include "multi_states.h"
#include "program_states.h"
#include "token_trie.h"

namespace cad::program {

class ProgramIndex {
  public:
    // Build every table by walking the token trie (tens of milliseconds).
    explicit ProgramIndex(const TokenTrie& trie);
    // Rebuild from ``serialize()`` output; throws std::invalid_argument if ``blob`` is not an
    // index of exactly this vocabulary (corrupt, truncated, other format version).
    ProgramIndex(std::shared_ptr<const TokenTable> table, const std::string& blob);

    std::string serialize() const;
    const TokenTable& table() const { return *table_; }
    int32_t vocab_size() const { return table_->vocab_size(); }

    // Write the allowed tokens of ``state`` under ``structure`` into ``row``.
    void fill(const Structure& structure, const State& state, uint32_t* row) const;
    // The same for the multi-file FSM.
    void fill(const MultiStructure& structure, const MState& state, uint32_t* row) const;

  private:
    struct ShapeEntry {
        bool present = false;
        TokenSet fixed;                // allowed for every document
        std::vector<int32_t> dynamic;  // read number bytes: walked per state
    };
    struct DigitGroup {
        int length = 0;
        std::vector<uint64_t> values;  // sorted
        std::vector<int32_t> ids;      // in the same order
    };
    static int gen_slot(const State& state) {
        return state.pending ? 5 + state.pending : state.matched;
    }
    void add_digit_tokens(uint32_t* row, int digit_count, uint64_t digits, uint64_t low,
                          uint64_t high) const;
    // The multi-file tables (multi_index.cpp): every multi_slot's tokens, walked under
    // MultiStructure::shape().
    void build_multi(const TokenTrie& trie, const std::vector<bool>& digit_token);
    // A path state near the length limit: every token walked.
    void fill_walking_all(const MultiStructure& structure, const MState& state,
                          uint32_t* row) const;

    std::shared_ptr<const TokenTable> table_;
    std::array<TokenSet, 13> gen_;
    std::array<std::array<ShapeEntry, kShapeSlots>, 4> shapes_;
    std::array<ShapeEntry, kMultiSlots> multi_;
    std::vector<DigitGroup> digit_groups_;
};

}  // namespace cad::program
