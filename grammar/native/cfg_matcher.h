// A compiled context-free grammar bound to a vocabulary, and the matcher over it: the
// interface both engines (the LR(1) DPDA and pruned Earley) implement.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "cfg_grammar.h"
#include "mask_precompute.h"
#include "matcher.h"
#include "token_trie.h"

namespace cad::cfg {

class CfgMatcher;

class CompiledCfg : public std::enable_shared_from_this<CompiledCfg> {
  public:
    virtual ~CompiledCfg() = default;
    virtual const char* engine() const = 0;
    virtual std::unique_ptr<CfgMatcher> matcher() = 0;
    // Whether ``data`` is a complete sentence.
    virtual bool accepts(const std::string& data) = 0;
    // Start building masks in the background, holding at most ``max_bytes`` of them (the
    // worker stops once they and its scratch tables reach it); false when the engine has no
    // worker or it was started before.
    virtual bool start_precompute(size_t max_bytes) = 0;
    // What the mask cache holds, by who built it.
    virtual MaskStats mask_stats() const = 0;
    const TokenTrie& trie() const { return *trie_; }

    // Parse states shared by every caller, for machines that store a state and resume from
    // it later: a state is the text read so far, interned as an int (equal texts, equal
    // ids) that stays valid while the grammar lives. Thread-safe; an id the grammar never
    // gave out throws std::out_of_range.
    virtual int32_t initial_state() = 0;
    // The state after ``data`` from ``state``; kDead when no sentence starts that way.
    virtual int32_t feed_state(int32_t state, std::string_view data) = 0;
    // Whether the text of ``state`` is a sentence.
    virtual bool state_accepting(int32_t state) = 0;
    // The allowed tokens after ``state`` (the end-of-sequence token once it is a sentence),
    // written into ``row`` (bitmask_words(vocab size) words).
    virtual void fill_state(int32_t state, uint32_t* row) = 0;

  protected:
    explicit CompiledCfg(std::shared_ptr<const TokenTrie> trie) : trie_(std::move(trie)) {}
    std::shared_ptr<const TokenTrie> trie_;
};

// Which engine ``compile_cfg`` runs: the DPDA when the grammar is LR(1) (``Auto``), or the one
// named (``Dpda`` throws NotLr1 for a grammar that is not LR(1)).
enum class EngineChoice { Auto, Dpda, Earley };

struct CompileResult {
    std::shared_ptr<CompiledCfg> compiled;
    std::string lr_note;  // why the grammar is not LR(1), when Earley was chosen for that
    int32_t lr_states = 0;
};

CompileResult compile_cfg(const Grammar& grammar, std::shared_ptr<const TokenTrie> trie,
                          EngineChoice choice);

struct LrTables;
std::shared_ptr<CompiledCfg> make_dpda(LrTables tables, std::shared_ptr<const TokenTrie> trie);
std::shared_ptr<CompiledCfg> make_earley(const Grammar& grammar,
                                         std::shared_ptr<const TokenTrie> trie);

class CfgMatcher : public NativeMatcher {
  public:
    // Advance by one token; false (and no change) when the grammar does not allow it. The
    // end-of-sequence token is allowed once the output is a sentence, and ends the matcher.
    virtual bool accept_token(int32_t token) = 0;
    // Advance by raw bytes (not tied to token boundaries); false leaves no change.
    virtual bool accept_bytes(const std::string& data) = 0;
    // Undo the last ``steps`` accepted tokens or byte runs.
    virtual void rollback(size_t steps) = 0;
    virtual bool is_accepting() = 0;
    virtual bool is_finished() const = 0;
    // The bytes every continuation must start with: while exactly one byte can follow (and
    // the output is not yet a sentence), it is forced (jump-forward decoding).
    virtual std::string forced_bytes() = 0;
    // Accepted tokens and byte runs so far.
    virtual size_t steps() const = 0;
};

constexpr size_t kMaxForcedBytes = 4096;

}  // namespace cad::cfg
