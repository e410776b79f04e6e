// How program text goes on the tape as tokens (the compiled twin of
// ``cad.selector.program_tokens``): the tokenizer's tokens for forced literals and for a
// copy's text (asked of the decoder's tokenizer once each, then cached), and for an op's
// text the longest allowed token at every model decision, found by walking the token trie
// along the text under a scratch program matcher.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "flat_index.h"
#include "program_index.h"
#include "program_matcher.h"
#include "program_proposals.h"
#include "token_trie.h"

namespace cad::drafting {

// A copy's text as tokens, and how many lines it holds.
struct Echo {
    std::vector<int32_t> tokens;
    int64_t line_breaks = 0;
};

// The decoder's tokenizer as the drafter and the tape need it; every answer is cached, so
// the tokenizer is asked once per distinct literal and copy.
class TokenSource {
  public:
    virtual ~TokenSource() = default;
    const std::vector<int32_t>& literal(const std::string& bytes);
    // The tokens of a copy op's text (OpKind::Lines or Span).
    const Echo& echo(const OpView& op);
    // Whether the copy op's text is already tokenized.
    bool has_echo(const OpView& op) const;

  protected:
    virtual std::vector<int32_t> encode_literal(const std::string& bytes) = 0;
    virtual Echo encode_echo(const OpView& op) = 0;

  private:
    struct EchoKey {
        OpKind kind;
        std::array<int64_t, 4> values;
        bool operator==(const EchoKey& other) const {
            return kind == other.kind && values == other.values;
        }
    };
    struct EchoHash {
        size_t operator()(const EchoKey& key) const;
    };
    std::unordered_map<std::string, std::vector<int32_t>> literals_;
    std::unordered_map<EchoKey, Echo, EchoHash> echoes_;
};

// Tokens of an op's text from the current point, and whether the model decides each.
struct OpTokens {
    std::vector<int32_t> tokens;
    std::vector<uint8_t> decided;
    bool complete = false;
};

// Every token that is a prefix of ``text``: (its length, the lowest id with those bytes),
// shortest first, at most the longest token's length.
void prefix_tokens(const TokenTrie& trie, std::string_view text,
                   std::vector<std::pair<uint32_t, int32_t>>& out);

// Tokens of program text, cached by the FSM state the text starts from and the text itself
// (what the tokens depend on), so the same continuation after different prefixes (a gen body
// that grew, the same copy proposed in the next forward) is tokenized once.
class ProgramTokenizer {
  public:
    ProgramTokenizer(std::shared_ptr<const program::ProgramIndex> index,
                     std::shared_ptr<const TokenTrie> trie, std::vector<uint64_t> line_widths,
                     bool subline, TokenSource& source);

    // Stand after the op written so far as ``prefix`` (false when the FSM refuses it);
    // ``after`` then tokenizes continuations from there, ``end`` steps back.
    bool begin(std::string_view prefix);
    // The tokens the decoder appends when the op goes on with ``rest`` (after the prefix
    // ``begin`` took), up to the op's end (or as far as ``rest`` can be followed, or
    // ``limit``).
    const OpTokens& after(std::string_view rest, int32_t limit);
    void end();
    // ``begin(prefix)``, ``after(text past the prefix)``, ``end()``: the tokens when the op
    // written so far as ``prefix`` goes on as ``text``.
    const OpTokens& op_tokens(std::string_view prefix, std::string_view text, int32_t limit);
    const TokenTrie& trie() const { return *trie_; }

  private:
    struct Entry {
        program::State state;
        std::string rest;
        int32_t limit;
        OpTokens tokens;
        int32_t next;  // the entry stored before it under the same key, or -1
    };
    static uint64_t key_of(const program::State& state, std::string_view rest, int32_t limit);
    OpTokens tokenize(std::string_view rest, int32_t limit);

    std::shared_ptr<const TokenTrie> trie_;
    program::ProgramMatcher scratch_;
    TokenSource& source_;
    bool started_ = false;
    bool refused_ = false;
    // The newest entry under each key (a flat table: a cached proposal is found in a probe
    // or two, which matters when a CPU forward has just evicted the caches).
    FlatIndex newest_;
    std::vector<Entry> entries_;
    std::vector<std::pair<uint32_t, int32_t>> prefixes_;
    OpTokens none_;
};

}  // namespace cad::drafting
