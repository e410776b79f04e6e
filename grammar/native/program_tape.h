// The token tape of program decoding in native code (the compiled twin of
// ``cad.selector.tape.ProgramTape`` for the plain program FSM), and the walk that accepts a
// path of a draft tree.
//
// The tape puts model-decided tokens, the literals the FSM forces and the copied text of each
// completed copy on record, exactly as the Python tape does. The acceptance walk goes down
// from the end of the known chain: at a node where the model decides it waits for the choice
// (``choose``) or takes the forced program's (``run_forced``: the longest token that
// continues the program text and that the FSM allows); what the FSM forces after it and the
// copied text of a completed copy follow without a decision. The walk ends where a token
// leaves the tree (those tokens are what the next forward feeds), at the end of the program
// or of the token budget.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "draft_tree.h"
#include "program_matcher.h"
#include "program_tokens.h"

namespace cad::drafting {

struct TapeCounts {
    int64_t generated = 0;
    int64_t forced = 0;
    int64_t copied = 0;
    int64_t ops = 0;
    int64_t lines_copied = 0;
    int64_t lines_generated = 0;
    bool truncated = false;
};

enum WalkStatus : int32_t { NeedChoice = 0, LeftTree = 1, Finished = 2 };

class ProgramTape {
  public:
    ProgramTape(program::ProgramMatcher& matcher, TokenSource& source, const TokenTrie& trie)
        : matcher_(matcher), source_(source), trie_(trie) {}

    // Forced literals and copied text up to the next point where the model decides.
    void take_forced(std::vector<int32_t>& out);
    // Put a model-decided token on the tape (throws if the FSM refuses it).
    void decide(int32_t token);
    // The longest token continuing ``target`` (a program's canonical text) that the FSM
    // allows next: how forced-program mode stands in for the model.
    int32_t target_token(std::string_view target);
    // Close the program validly without the model (a spent token budget).
    void finish_truncated();
    bool finished() const { return matcher_.is_accepting(); }
    // The text of the op in progress from its ``<``.
    std::string_view op_prefix() const;

    // Start accepting at the end of the known chain (``known`` nodes) of ``tree``.
    WalkStatus begin(const DraftTree& tree, int32_t known, int64_t limit);
    // The model's choice at the current node; the walk goes on to the next decision.
    WalkStatus choose(const DraftTree& tree, int32_t token, int64_t limit);
    // The whole walk with the forced program's choices.
    WalkStatus run_forced(const DraftTree& tree, int32_t known, std::string_view target,
                          int64_t limit);
    // From decision ``node``, walk as if the model chose every drafted first child: the
    // decision nodes passed, the token drafted after each (-1 where none is or the walk
    // stops), the mask at each written to ``rows`` (``words`` words apart, at most
    // ``capacity`` rows); the tape is then put back as it was.
    void walk_ahead(const DraftTree& tree, int32_t node, int64_t limit, uint32_t* rows,
                    size_t words, size_t capacity, std::vector<int32_t>& nodes,
                    std::vector<int32_t>& expected);

    int32_t node() const { return node_; }
    const std::vector<int32_t>& path() const { return path_; }
    const std::vector<int32_t>& pending() const { return pending_; }
    const std::vector<int32_t>& tokens() const { return tokens_; }
    const std::vector<uint8_t>& decided() const { return decided_; }
    const TapeCounts& counts() const { return counts_; }
    program::ProgramMatcher& matcher() { return matcher_; }

  private:
    struct Mark {
        size_t steps;
        size_t tokens;
        size_t resolved;
        uint32_t op_start;
        TapeCounts counts;
    };
    void take_completed_ops(std::vector<int32_t>& out);
    void record(const int32_t* ids, size_t count, bool decided);
    WalkStatus next_decision(int64_t limit);
    Mark mark() const;
    void undo(const Mark& mark);

    program::ProgramMatcher& matcher_;
    TokenSource& source_;
    const TokenTrie& trie_;
    std::vector<int32_t> tokens_;
    std::vector<uint8_t> decided_;
    TapeCounts counts_;
    size_t resolved_ = 0;
    uint32_t op_start_ = 0;
    int32_t node_ = -1;
    std::vector<int32_t> path_;
    std::vector<int32_t> pending_;
    std::vector<int32_t> written_;
    std::vector<std::pair<uint32_t, int32_t>> prefixes_;
};

}  // namespace cad::drafting
