#include "dpda.h"

#include <atomic>
#include <mutex>
#include <stdexcept>

#include "bitmask.h"
#include "cfg_matcher.h"
#include "mask_cache.h"

namespace cad::cfg {

int32_t InternedStack::push(int32_t state, int32_t parent) {
    const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(state)) << 32) |
                         static_cast<uint32_t>(parent);
    auto [found, inserted] = ids_.emplace(key, static_cast<int32_t>(nodes_.size()));
    if (inserted) nodes_.push_back({state, parent});
    return found->second;
}

namespace {

constexpr int32_t kUnset = INT32_MIN;
constexpr int32_t kFinished = -10;  // history entry after the end-of-sequence token

class DpdaMatcher;

class DpdaGrammar final : public CompiledCfg {
  public:
    DpdaGrammar(LrTables tables, std::shared_ptr<const TokenTrie> trie)
        : CompiledCfg(std::move(trie)),
          tables_(std::move(tables)),
          masks_(new std::atomic<const StateMask*>[static_cast<size_t>(tables_.states)]) {
        for (int32_t state = 0; state < tables_.states; ++state) masks_[state] = nullptr;
        for (int32_t atom = 0; atom < tables_.atoms.end_atom; ++atom) atom_width_.push_back(0);
        for (int byte = 0; byte < 256; ++byte) ++atom_width_[tables_.atoms.atom_of_byte[byte]];
    }

    const char* engine() const override { return "dpda"; }
    std::unique_ptr<CfgMatcher> matcher() override;
    bool accepts(const std::string& data) override;

    const LrTables& tables() const { return tables_; }
    int32_t atom_width(int32_t atom) const { return atom_width_[atom]; }

    // The adaptive mask of LR state ``state``, computed on first use (thread-safe).
    const StateMask& state_mask(int32_t state) {
        const StateMask* found = masks_[state].load(std::memory_order_acquire);
        if (found) return *found;
        std::lock_guard<std::mutex> guard(lock_);
        found = masks_[state].load(std::memory_order_relaxed);
        if (found) return *found;
        owned_.push_back(std::make_unique<StateMask>(compute_mask(state)));
        masks_[state].store(owned_.back().get(), std::memory_order_release);
        return *owned_.back();
    }

  private:
    // Memoised local-view transitions over the interned stacks.
    struct LocalStep {
        DpdaGrammar& grammar;
        int32_t operator()(int32_t config, uint8_t byte) {
            const LrTables& tables = grammar.tables_;
            const size_t atoms = static_cast<size_t>(tables.atoms.count());
            const size_t slot = static_cast<size_t>(config) * atoms + tables.atoms.atom_of_byte[byte];
            if (grammar.memo_.size() <= slot) grammar.memo_.resize((config + 1) * atoms, kUnset);
            int32_t next = grammar.memo_[slot];
            if (next == kUnset) {
                next = lr_step(tables, grammar.local_, config, tables.atoms.atom_of_byte[byte],
                               grammar.pending_);
                grammar.memo_[slot] = next;
            }
            return next;
        }
    };

    StateMask compute_mask(int32_t state) {
        LocalStep step{*this};
        MaskBuilder<LocalStep> builder(*trie_, step);
        StateMask mask = builder.build(local_.push(state, kUnknownBelow));
        // Undecided entries carry the states their local configuration pushed above the top
        // (bottom first), so a fill can rebuild it over the real stack without the interned
        // stacks, which other threads may be growing.
        std::unordered_map<int32_t, int32_t> offsets;
        for (StateMask::Undecided& entry : mask.undecided) {
            auto [found, inserted] =
                offsets.emplace(entry.config, static_cast<int32_t>(mask.contexts.size()));
            if (inserted) {
                std::vector<int32_t> chain;
                for (int32_t node = entry.config; local_.parent(node) != kUnknownBelow;
                     node = local_.parent(node)) {
                    chain.push_back(local_.state(node));
                }
                mask.contexts.push_back(static_cast<int32_t>(chain.size()));
                mask.contexts.insert(mask.contexts.end(), chain.rbegin(), chain.rend());
            }
            entry.config = found->second;
        }
        return mask;
    }

    LrTables tables_;
    std::vector<int32_t> atom_width_;
    std::unique_ptr<std::atomic<const StateMask*>[]> masks_;
    std::mutex lock_;
    std::vector<std::unique_ptr<StateMask>> owned_;
    InternedStack local_;
    std::vector<int32_t> memo_;
    std::vector<int32_t> pending_;
};

class DpdaMatcher final : public CfgMatcher {
  public:
    explicit DpdaMatcher(std::shared_ptr<DpdaGrammar> grammar) : grammar_(std::move(grammar)) {
        const int32_t start = stack_.push(0, kBottom);
        history_.push_back({start, stack_.size()});
    }

    int32_t vocab_size() const override { return grammar_->trie().vocab_size(); }

    bool accept_token(int32_t token) override {
        const int32_t top = history_.back().top;
        if (top == kFinished || token < 0 || token >= vocab_size()) return false;
        const TokenTable& table = grammar_->trie().table();
        if (token == table.eos()) {
            if (!accepting(top)) return false;
            history_.push_back({kFinished, stack_.size()});
            return true;
        }
        const std::string_view bytes = table.token(token);
        return !bytes.empty() && advance(bytes.data(), bytes.size());
    }

    bool accept_bytes(const std::string& data) override {
        return history_.back().top != kFinished && advance(data.data(), data.size());
    }

    void rollback(size_t steps) override {
        if (steps >= history_.size()) {
            throw std::invalid_argument("cannot roll back " + std::to_string(steps) + " of " +
                                        std::to_string(history_.size() - 1) + " accepted tokens");
        }
        history_.resize(history_.size() - steps);
        stack_.truncate(history_.back().stack_size);
    }

    bool is_accepting() override {
        const int32_t top = history_.back().top;
        return top == kFinished || accepting(top);
    }
    bool is_finished() const override { return history_.back().top == kFinished; }
    size_t steps() const override { return history_.size() - 1; }

    void fill_bitmask(uint32_t* row) override {
        const size_t words = bitmask_words(vocab_size());
        const int32_t top = history_.back().top;
        if (top == kFinished) {
            std::memset(row, 0, words * sizeof(uint32_t));
            return;
        }
        const StateMask& mask = grammar_->state_mask(stack_.state(top));
        mask.write(row, words);
        if (!mask.undecided.empty()) resolve(mask, top, row);
        const int32_t eos = grammar_->trie().table().eos();
        if (eos >= 0 && accepting(top)) set_token(row, eos);
    }

    std::string forced_bytes() override {
        std::string forced;
        int32_t top = history_.back().top;
        if (top == kFinished) return forced;
        const size_t mark = stack_.size();
        const LrTables& tables = grammar_->tables();
        while (forced.size() < kMaxForcedBytes && !accepting(top)) {
            int32_t only = -1;
            int live = 0;
            for (int32_t atom = 0; atom < tables.atoms.end_atom && live < 2; ++atom) {
                if (lr_step(tables, stack_, top, atom, pending_, false) >= 0) {
                    ++live;
                    only = atom;
                }
            }
            if (live != 1 || grammar_->atom_width(only) != 1) break;
            top = lr_step(tables, stack_, top, only, pending_);
            forced.push_back(static_cast<char>(tables.atoms.first_byte[only]));
        }
        stack_.truncate(mark);
        return forced;
    }

  private:
    struct Entry {
        int32_t top;
        size_t stack_size;
    };

    // Full-context transitions on this matcher's stack; scratch nodes are dropped on release.
    struct FullStep {
        DpdaMatcher& matcher;
        int32_t operator()(int32_t config, uint8_t byte) {
            const LrTables& tables = matcher.grammar_->tables();
            return lr_step(tables, matcher.stack_, config, tables.atoms.atom_of_byte[byte],
                           matcher.pending_);
        }
        size_t mark() const { return matcher.stack_.size(); }
        void release(size_t mark) { matcher.stack_.truncate(mark); }
    };

    bool accepting(int32_t top) {
        const LrTables& tables = grammar_->tables();
        return lr_step(tables, stack_, top, tables.atoms.end_atom, pending_, false) == kAccepted;
    }

    bool advance(const char* data, size_t size) {
        const size_t mark = stack_.size();
        const LrTables& tables = grammar_->tables();
        int32_t top = history_.back().top;
        for (size_t i = 0; i < size; ++i) {
            top = lr_step(tables, stack_, top, tables.atoms.atom_of_byte[static_cast<uint8_t>(data[i])],
                          pending_);
            if (top < 0) {
                stack_.truncate(mark);
                return false;
            }
        }
        history_.push_back({top, stack_.size()});
        return true;
    }

    // Judge the undecided subtrees of ``mask`` with the real stack under ``top``.
    void resolve(const StateMask& mask, int32_t top, uint32_t* row) {
        const size_t mark = stack_.size();
        FullStep step{*this};
        RowWalker<FullStep> walker(grammar_->trie(), step, row, frames_);
        int32_t context = -1;
        int32_t parent = top;
        for (const StateMask::Undecided& entry : mask.undecided) {
            if (entry.config != context) {
                stack_.truncate(mark);
                context = entry.config;
                parent = top;
                const int32_t* chain = mask.contexts.data() + context;
                for (int32_t i = 1; i <= chain[0]; ++i) parent = stack_.push(chain[i], parent);
            }
            walker.resolve(entry.node, parent, grammar_->trie().byte(entry.node));
        }
        stack_.truncate(mark);
    }

    std::shared_ptr<DpdaGrammar> grammar_;
    GrowingStack stack_;
    std::vector<Entry> history_;
    std::vector<int32_t> pending_;
    std::vector<WalkFrame> frames_;
};

std::unique_ptr<CfgMatcher> DpdaGrammar::matcher() {
    return std::make_unique<DpdaMatcher>(std::static_pointer_cast<DpdaGrammar>(shared_from_this()));
}

bool DpdaGrammar::accepts(const std::string& data) {
    DpdaMatcher matcher(std::static_pointer_cast<DpdaGrammar>(shared_from_this()));
    return matcher.accept_bytes(data) && matcher.is_accepting();
}

}  // namespace

std::shared_ptr<CompiledCfg> make_dpda(LrTables tables, std::shared_ptr<const TokenTrie> trie) {
    return std::make_shared<DpdaGrammar>(std::move(tables), std::move(trie));
}

}  // namespace cad::cfg
