// Byte-level Earley recognition with ZapFormat's dependency pruning (the native form of
// ``cad.grammar.cfg.earley``, whose docstring describes the method), behind the CfgMatcher
// interface.
//
// A state is the tuple of Earley sets that can still matter plus an accepting flag, interned
// as an int, so transitions are memoised per (state, byte atom) and equal parse situations at
// different positions share every cache. All interning happens under the grammar's lock.
#include <algorithm>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "bitmask.h"
#include "cfg_matcher.h"
#include "fnv1a.h"
#include "mask_cache.h"

namespace cad::cfg {

namespace {

constexpr int32_t kUnset = INT32_MIN;
constexpr int32_t kFinished = -10;
constexpr size_t kWindow = 3;  // sets a local view keeps

struct Item {
    int32_t core;
    int32_t origin;  // an index into the state's sets; negative: cut off by a local view
    bool operator==(const Item& other) const { return core == other.core && origin == other.origin; }
    bool operator<(const Item& other) const {
        return core != other.core ? core < other.core : origin < other.origin;
    }
};

uint64_t item_key(const Item& item) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(item.core)) << 32) |
           static_cast<uint32_t>(item.origin);
}

using ItemSet = std::vector<Item>;  // sorted, unique

struct EarleyState {
    std::vector<ItemSet> sets;  // oldest first
    bool accepting = false;
};

std::vector<int32_t> encode(const EarleyState& state) {
    std::vector<int32_t> key{state.accepting ? 1 : 0};
    for (const ItemSet& set : state.sets) {
        key.push_back(static_cast<int32_t>(set.size()));
        for (const Item& item : set) {
            key.push_back(item.core);
            key.push_back(item.origin);
        }
    }
    return key;
}

struct KeyHash {
    size_t operator()(const std::vector<int32_t>& key) const {
        uint64_t digest = fnv1a::kOffsetBasis;
        for (int32_t value : key) digest = fnv1a::symbol(digest, static_cast<uint32_t>(value));
        return static_cast<size_t>(digest);
    }
};

ItemSet sorted_unique(std::vector<Item> items) {
    std::sort(items.begin(), items.end());
    items.erase(std::unique(items.begin(), items.end()), items.end());
    return items;
}

class EarleyGrammar final : public CompiledCfg {
  public:
    EarleyGrammar(const Grammar& grammar, std::shared_ptr<const TokenTrie> trie)
        : CompiledCfg(std::move(trie)),
          cores_(grammar),
          atoms_(grammar.terminals),
          root_children_(all_children(*trie_)) {
        terminal_has_atom_.assign(grammar.terminals.size(), std::vector<bool>(atoms_.count(), false));
        for (size_t t = 0; t < grammar.terminals.size(); ++t) {
            for (int32_t atom : atoms_.terminal_atoms[t]) terminal_has_atom_[t][atom] = true;
        }
        std::lock_guard<std::mutex> guard(lock_);
        EarleyState initial;
        closure({}, {{cores_.start_core, 0}}, initial);
        initial_ = intern(std::move(initial));
    }

    const char* engine() const override { return "earley"; }
    std::unique_ptr<CfgMatcher> matcher() override;
    // No worker: every step and mask interns states under the one lock, so a worker building
    // masks would hold it for whole walks and delay requests.
    bool start_precompute(size_t) override { return false; }
    MaskStats mask_stats() const override { return counters_.snapshot(false); }
    bool accepts(const std::string& data) override {
        std::lock_guard<std::mutex> guard(lock_);
        int32_t config = initial_;
        for (char byte : data) {
            config = step(config, static_cast<uint8_t>(byte));
            if (config < 0) return false;
        }
        return states_[config].accepting;
    }

    // A state is an interned Earley state, as the matchers' are.
    int32_t initial_state() override { return initial_; }
    int32_t feed_state(int32_t state, std::string_view data) override {
        std::lock_guard<std::mutex> guard(lock_);
        check_state(state);
        for (const char byte : data) {
            state = step(state, static_cast<uint8_t>(byte));
            if (state < 0) return kDead;
        }
        return state;
    }
    bool state_accepting(int32_t state) override {
        std::lock_guard<std::mutex> guard(lock_);
        check_state(state);
        return states_[state].accepting;
    }
    void fill_state(int32_t state, uint32_t* row) override;

    std::mutex& lock() { return lock_; }
    int32_t initial() const { return initial_; }
    bool accepting(int32_t config) const { return states_[config].accepting; }

    // The state after ``byte``: an id, kDead, or kDependent (a local view completing into the
    // part it cut off). Memoised. Caller holds the lock.
    int32_t step(int32_t config, uint8_t byte) {
        const size_t atoms = static_cast<size_t>(atoms_.count());
        const int32_t atom = atoms_.atom_of_byte[byte];
        const size_t slot = static_cast<size_t>(config) * atoms + atom;
        if (memo_.size() <= slot) memo_.resize((static_cast<size_t>(config) + 1) * atoms, kUnset);
        int32_t next = memo_[slot];
        if (next == kUnset) {
            next = compute_step(config, atom);
            memo_[slot] = next;
        }
        return next;
    }

    // The mask of the local view of ``config``. Caller holds the lock.
    const StateMask& state_mask(int32_t config) {
        const int32_t view = local(config);
        auto found = masks_.find(view);
        if (found != masks_.end()) return found->second;
        struct Step {
            EarleyGrammar& grammar;
            int32_t operator()(int32_t config, uint8_t byte) { return grammar.step(config, byte); }
            // Compacted Earley states are bounded already: the view is the state itself.
            int32_t top_view(int32_t config, size_t) const { return config; }
            // Each Earley view explores the slice afresh (its masks are built once per view).
            bool slice_pair_closed(uint64_t) const { return false; }
            const SliceMoves& slice_moves() const { return TokenSlice::moves(); }
            void close_slice_pairs(const std::vector<uint64_t>&) {}
        } local_step{*this};
        const FirstByteCount count = count_first_bytes(*trie_, local_step, view, root_children_);
        const WalkPlan plan = plan_walk(*trie_, local_step, view, count);
        const StateMask& mask =
            masks_.emplace(view, build_state_mask(*trie_, local_step, view, count, plan)).first->second;
        counters_.add(false, mask.bytes());
        return mask;
    }

    // Bytes that keep ``config`` alive (jump-forward), up to two. Caller holds the lock.
    std::vector<uint8_t> live_bytes(int32_t config) {
        std::vector<uint8_t> live;
        for (int byte = 0; byte < 256 && live.size() < 2; ++byte) {
            if (step(config, static_cast<uint8_t>(byte)) >= 0) live.push_back(static_cast<uint8_t>(byte));
        }
        return live;
    }

  private:
    // Throws for a state id never interned (caller holds the lock).
    void check_state(int32_t state) const {
        if (state < 0 || static_cast<size_t>(state) >= states_.size()) {
            throw std::out_of_range("no parse state " + std::to_string(state) + " in this grammar");
        }
    }

    int32_t intern(EarleyState state) {
        std::vector<int32_t> key = encode(state);
        auto [found, inserted] = ids_.emplace(std::move(key), static_cast<int32_t>(states_.size()));
        if (inserted) states_.push_back(std::move(state));
        return found->second;
    }

    int32_t local(int32_t config) {
        auto found = locals_.find(config);
        if (found != locals_.end()) return found->second;
        const std::vector<ItemSet>& sets = states_[config].sets;
        int32_t view = config;
        if (sets.size() > kWindow) {
            const int32_t cut = static_cast<int32_t>(sets.size() - kWindow);
            EarleyState kept;
            for (size_t position = static_cast<size_t>(cut); position < sets.size(); ++position) {
                ItemSet moved;
                for (const Item& item : states_[config].sets[position]) {
                    moved.push_back({item.core, item.origin - cut});
                }
                kept.sets.push_back(sorted_unique(std::move(moved)));
            }
            view = intern(std::move(kept));
        }
        locals_.emplace(config, view);
        return view;
    }

    int32_t compute_step(int32_t config, int32_t atom) {
        std::vector<Item> kernel;
        for (const Item& item : states_[config].sets.back()) {
            const int32_t symbol = cores_.next_symbol[item.core];
            if (symbol < 0 && terminal_has_atom_[terminal_index(symbol)][atom]) {
                kernel.push_back({item.core + 1, item.origin});
            }
        }
        if (kernel.empty()) return kDead;
        EarleyState next;
        if (!closure(states_[config].sets, kernel, next)) return kDependent;
        return intern(std::move(next));
    }

    // Predict and complete from ``kernel`` as the set after ``sets``, then prune; false when a
    // completion reaches a cut-off origin.
    bool closure(const std::vector<ItemSet>& sets, const std::vector<Item>& kernel,
                 EarleyState& out) {
        const int32_t here = static_cast<int32_t>(sets.size());
        std::unordered_set<uint64_t> seen;
        std::vector<Item> items;
        std::vector<Item> agenda;
        auto add = [&](Item item) {
            if (seen.insert(item_key(item)).second) {
                items.push_back(item);
                agenda.push_back(item);
            }
        };
        for (const Item& item : kernel) add(item);
        bool accepting = false;
        while (!agenda.empty()) {
            const Item item = agenda.back();
            agenda.pop_back();
            const int32_t symbol = cores_.next_symbol[item.core];
            if (symbol == kComplete) {
                if (item.core == cores_.accept_core) accepting = true;
                if (item.origin == here) continue;
                if (item.origin < 0) return false;
                const int32_t head = cores_.lhs[item.core];
                for (const Item& parent : sets[item.origin]) {
                    if (cores_.next_symbol[parent.core] == head) add({parent.core + 1, parent.origin});
                }
            } else if (symbol >= 0) {
                for (int32_t predicted : cores_.first_cores(symbol)) add({predicted, here});
                if (cores_.nullable[symbol]) add({item.core + 1, item.origin});
            }
        }
        out.accepting = accepting;
        out.sets = compact(sets, items);
        return true;
    }

    // ZapFormat's reachability pruning: keep an item of an older set only if a kept item of
    // a later set will complete into it; drop completed items of the newest set; renumber.
    std::vector<ItemSet> compact(const std::vector<ItemSet>& sets, const std::vector<Item>& newest) {
        const int32_t here = static_cast<int32_t>(sets.size());
        std::vector<Item> kept_newest;
        for (const Item& item : newest) {
            if (cores_.next_symbol[item.core] != kComplete) kept_newest.push_back(item);
        }
        std::vector<std::vector<int32_t>> demands(sets.size());
        auto demand = [&demands](int32_t position, int32_t head) {
            std::vector<int32_t>& heads = demands[position];
            if (std::find(heads.begin(), heads.end(), head) == heads.end()) heads.push_back(head);
        };
        for (const Item& item : kept_newest) {
            if (item.origin >= 0 && item.origin < here) demand(item.origin, cores_.lhs[item.core]);
        }
        std::vector<std::vector<Item>> kept(sets.size());
        std::vector<bool> used(sets.size(), false);
        for (int32_t position = here - 1; position >= 0; --position) {
            std::vector<int32_t>& wanted = demands[position];
            if (wanted.empty()) continue;
            used[position] = true;
            std::vector<int32_t> agenda = wanted;
            while (!agenda.empty()) {
                const int32_t head = agenda.back();
                agenda.pop_back();
                for (const Item& item : sets[position]) {
                    if (cores_.next_symbol[item.core] != head) continue;
                    kept[position].push_back(item);
                    const int32_t item_head = cores_.lhs[item.core];
                    if (item.origin == position) {
                        if (std::find(wanted.begin(), wanted.end(), item_head) == wanted.end()) {
                            wanted.push_back(item_head);
                            agenda.push_back(item_head);
                        }
                    } else if (item.origin >= 0) {
                        demand(item.origin, item_head);
                    }
                }
            }
        }
        std::vector<int32_t> renumber(sets.size() + 1, -1);
        int32_t next = 0;
        for (int32_t position = 0; position < here; ++position) {
            if (used[position]) renumber[position] = next++;
        }
        renumber[here] = next;
        auto moved = [&renumber](const Item& item) {
            return Item{item.core, item.origin >= 0 ? renumber[item.origin] : item.origin};
        };
        std::vector<ItemSet> result;
        for (int32_t position = 0; position < here; ++position) {
            if (!used[position]) continue;
            std::vector<Item> set;
            for (const Item& item : kept[position]) set.push_back(moved(item));
            result.push_back(sorted_unique(std::move(set)));
        }
        std::vector<Item> last;
        for (const Item& item : kept_newest) last.push_back(moved(item));
        result.push_back(sorted_unique(std::move(last)));
        return result;
    }

    ItemCores cores_;
    ByteAtoms atoms_;
    ChildSet root_children_;  // every child of the root: Earley steps them all on a first visit
    std::vector<std::vector<bool>> terminal_has_atom_;
    std::mutex lock_;
    std::vector<EarleyState> states_;
    std::unordered_map<std::vector<int32_t>, int32_t, KeyHash> ids_;
    std::unordered_map<int32_t, int32_t> locals_;
    std::unordered_map<int32_t, StateMask> masks_;
    MaskCounters counters_;
    std::vector<int32_t> memo_;
    int32_t initial_ = 0;
};

class EarleyMatcher final : public CfgMatcher {
  public:
    explicit EarleyMatcher(std::shared_ptr<EarleyGrammar> grammar)
        : EarleyMatcher(grammar, grammar->initial()) {}

    // A matcher at the interned state ``config``.
    EarleyMatcher(std::shared_ptr<EarleyGrammar> grammar, int32_t config)
        : grammar_(std::move(grammar)), history_{config} {}

    int32_t vocab_size() const override { return grammar_->trie().vocab_size(); }

    bool accept_token(int32_t token) override {
        const int32_t config = history_.back();
        if (config == kFinished || token < 0 || token >= vocab_size()) return false;
        const TokenTable& table = grammar_->trie().table();
        std::lock_guard<std::mutex> guard(grammar_->lock());
        if (token == table.eos()) {
            if (!grammar_->accepting(config)) return false;
            history_.push_back(kFinished);
            return true;
        }
        const std::string_view bytes = table.token(token);
        return !bytes.empty() && advance(bytes.data(), bytes.size());
    }

    bool accept_bytes(const std::string& data) override {
        if (history_.back() == kFinished) return false;
        std::lock_guard<std::mutex> guard(grammar_->lock());
        return advance(data.data(), data.size());
    }

    void rollback(size_t steps) override {
        if (steps >= history_.size()) {
            throw std::invalid_argument("cannot roll back " + std::to_string(steps) + " of " +
                                        std::to_string(history_.size() - 1) + " accepted tokens");
        }
        history_.resize(history_.size() - steps);
    }

    bool is_accepting() override {
        const int32_t config = history_.back();
        if (config == kFinished) return true;
        std::lock_guard<std::mutex> guard(grammar_->lock());
        return grammar_->accepting(config);
    }
    bool is_finished() const override { return history_.back() == kFinished; }
    size_t steps() const override { return history_.size() - 1; }

    void fill_bitmask(uint32_t* row) override {
        const size_t words = bitmask_words(vocab_size());
        const int32_t config = history_.back();
        if (config == kFinished) {
            std::memset(row, 0, words * sizeof(uint32_t));
            return;
        }
        std::lock_guard<std::mutex> guard(grammar_->lock());
        const StateMask& mask = grammar_->state_mask(config);
        mask.write(row, words);
        if (!mask.undecided.empty()) resolve(mask, config, row);
        const int32_t eos = grammar_->trie().table().eos();
        if (eos >= 0 && grammar_->accepting(config)) set_token(row, eos);
    }

    std::string forced_bytes() override {
        std::string forced;
        int32_t config = history_.back();
        if (config == kFinished) return forced;
        std::lock_guard<std::mutex> guard(grammar_->lock());
        while (forced.size() < kMaxForcedBytes && !grammar_->accepting(config)) {
            const std::vector<uint8_t> live = grammar_->live_bytes(config);
            if (live.size() != 1) break;
            forced.push_back(static_cast<char>(live[0]));
            config = grammar_->step(config, live[0]);
        }
        return forced;
    }

  private:
    struct FullStep {
        EarleyGrammar& grammar;
        int32_t operator()(int32_t config, uint8_t byte) { return grammar.step(config, byte); }
        size_t mark() const { return 0; }
        void release(size_t) {}
    };

    bool advance(const char* data, size_t size) {
        int32_t config = history_.back();
        for (size_t i = 0; i < size; ++i) {
            config = grammar_->step(config, static_cast<uint8_t>(data[i]));
            if (config < 0) return false;
        }
        history_.push_back(config);
        return true;
    }

    // Judge the undecided subtrees from the real state: each one's parent path is walked
    // from ``config`` (sharing the prefix with the previous one), then its subtree.
    void resolve(const StateMask& mask, int32_t config, uint32_t* row) {
        FullStep step{*grammar_};
        const TokenTrie& trie = *mask.undecided_trie;
        RowWalker<FullStep> walker(trie, step, row, frames_);
        std::string_view walked;
        std::vector<int32_t> configs{config};
        for (const StateMask::Undecided& entry : mask.undecided) {
            const std::string_view path = trie.path(entry.node);
            const std::string_view parent_path = path.substr(0, path.size() - 1);
            size_t common = 0;
            while (common < walked.size() && common < parent_path.size() &&
                   walked[common] == parent_path[common]) {
                ++common;
            }
            configs.resize(common + 1);
            for (size_t i = common; i < parent_path.size() && configs.back() >= 0; ++i) {
                configs.push_back(grammar_->step(configs.back(), static_cast<uint8_t>(parent_path[i])));
            }
            walked = parent_path.substr(0, configs.size() - 1);
            if (configs.size() == parent_path.size() + 1 && configs.back() >= 0) {
                walker.resolve(entry.node, configs.back(), trie.byte(entry.node));
            }
        }
    }

    std::shared_ptr<EarleyGrammar> grammar_;
    std::vector<int32_t> history_;
    WalkScratch frames_;
};

std::unique_ptr<CfgMatcher> EarleyGrammar::matcher() {
    return std::make_unique<EarleyMatcher>(std::static_pointer_cast<EarleyGrammar>(shared_from_this()));
}

void EarleyGrammar::fill_state(int32_t state, uint32_t* row) {
    {
        std::lock_guard<std::mutex> guard(lock_);
        check_state(state);
    }
    EarleyMatcher(std::static_pointer_cast<EarleyGrammar>(shared_from_this()), state).fill_bitmask(row);
}

}  // namespace

std::shared_ptr<CompiledCfg> make_earley(const Grammar& grammar,
                                         std::shared_ptr<const TokenTrie> trie) {
    return std::make_shared<EarleyGrammar>(grammar, std::move(trie));
}

}  // namespace cad::cfg
