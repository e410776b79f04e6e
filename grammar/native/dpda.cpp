#include "dpda.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "bitmask.h"
#include "cfg_matcher.h"
#include "lr_frontier.h"
#include "mask_cache.h"

namespace cad::cfg {

int32_t InternedStack::push(int32_t state, int32_t parent) {
    const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(state)) << 32) |
                         static_cast<uint32_t>(parent);
    const auto [node, inserted] = ids_.try_emplace(key, static_cast<int32_t>(nodes_.size()));
    if (inserted) nodes_.push_back({state, parent});
    return node;
}

namespace {

constexpr int32_t kUnset = INT32_MIN;
constexpr int32_t kFinished = -10;  // history entry after the end-of-sequence token

class DpdaMatcher;

// Adaptive context for the mask cache. The top LR state alone is often not enough to judge a
// token (inside a string the top state is "a character was just shifted", and the next byte
// reduces it and pops below). So the cache is a tree of stack suffixes, top state first: a
// suffix whose local walk leaves more than kDeepenAbove tokens undecided, or whose large walk
// the caches could serve with more context, is not cached itself but split by the state below
// it, up to kMaxSuffix states; the stack bottom ends a suffix.
constexpr size_t kDeepenAbove = 1024;
constexpr int32_t kMaxSuffix = 32;

struct SuffixNode;

// A suffix node's children by the state below (kBottom for the end of the stack), read
// without the lock: open addressing, a slot's node stored before its key is published. When
// half full it is replaced by one twice the size; the old table stays alive for readers
// still probing it. Most nodes have a few children, so a node costs a few cache lines (a
// dense row per state would cost about a microsecond to allocate and clear).
class BelowTable {
  public:
    explicit BelowTable(size_t capacity) : capacity_(capacity), slots_(new Slot[capacity]) {
        for (size_t i = 0; i < capacity_; ++i) {
            slots_[i].key.store(kEmpty, std::memory_order_relaxed);
            slots_[i].node.store(nullptr, std::memory_order_relaxed);
        }
    }

    SuffixNode* find(int32_t state) const {
        for (size_t at = slot_of(state);; at = (at + 1) & (capacity_ - 1)) {
            const int32_t key = slots_[at].key.load(std::memory_order_acquire);
            if (key == state) return slots_[at].node.load(std::memory_order_relaxed);
            if (key == kEmpty) return nullptr;
        }
    }

    // Whether one more child would fill it past half (insert would refuse it).
    bool full() const { return 2 * (size_ + 1) > capacity_; }
    size_t bytes() const { return sizeof(BelowTable) + capacity_ * sizeof(Slot); }

    // Add a child (caller holds the lock); false when the table is too full to take it.
    bool insert(int32_t state, SuffixNode* node) {
        if (full()) return false;
        size_t at = slot_of(state);
        while (slots_[at].key.load(std::memory_order_relaxed) != kEmpty) at = (at + 1) & (capacity_ - 1);
        slots_[at].node.store(node, std::memory_order_relaxed);
        slots_[at].key.store(state, std::memory_order_release);
        ++size_;
        return true;
    }

    // A table twice the size holding the same children (caller holds the lock).
    std::unique_ptr<BelowTable> grown() const {
        auto table = std::make_unique<BelowTable>(2 * capacity_);
        for (size_t i = 0; i < capacity_; ++i) {
            const int32_t key = slots_[i].key.load(std::memory_order_relaxed);
            if (key != kEmpty) table->insert(key, slots_[i].node.load(std::memory_order_relaxed));
        }
        return table;
    }

  private:
    static constexpr int32_t kEmpty = INT32_MIN;
    struct Slot {
        std::atomic<int32_t> key;
        std::atomic<SuffixNode*> node;
    };
    size_t slot_of(int32_t state) const {
        return (static_cast<uint32_t>(state) * 2654435761u) & (capacity_ - 1);
    }

    size_t capacity_;  // a power of two
    size_t size_ = 0;
    std::unique_ptr<Slot[]> slots_;
};

struct SuffixNode {
    std::unique_ptr<StateMask> mask;         // the suffix's mask, or
    std::atomic<BelowTable*> below{nullptr};  // longer suffixes, by the state below
};

// The interned local views' stacks and their memoised transitions: the scratch one builder of
// masks works in. Requests share one (under the build lock); the precompute worker has its
// own, so that neither waits for the other's walks.
struct LocalView {
    InternedStack stack;
    std::vector<int32_t> memo;
    std::vector<int32_t> pending;
    // (slice state, configuration) pairs from which every string of the string slice is
    // accepted (see explore_slice_product), over ``stack``'s configurations.
    FlatIndex slice_closed;

    // Forget every stack, step and pair, and free their memory.
    void clear() {
        stack = InternedStack();
        memo = std::vector<int32_t>();
        pending = std::vector<int32_t>();
        slice_closed = FlatIndex();
    }

    // An upper bound on the memory held (the index of closed pairs: 16-byte slots, at least a
    // quarter full).
    size_t bytes() const {
        return stack.bytes() + (memo.capacity() + pending.capacity()) * sizeof(int32_t) +
               64 * std::max<size_t>(slice_closed.size(), 16);
    }
};

// The deepest top view LocalStep::top_view cuts (deeper ones keep the whole configuration).
constexpr size_t kMaxView = 8;

// Suffixes of at most this many states are precomputed; longer ones are built on demand.
constexpr size_t kPrecomputeSuffix = 3;

class DpdaGrammar final : public CompiledCfg {
  public:
    DpdaGrammar(LrTables tables, std::shared_ptr<const TokenTrie> trie)
        : CompiledCfg(std::move(trie)), tables_(std::move(tables)), roots_(root_slots()) {
        for (int32_t atom = 0; atom < tables_.atoms.end_atom; ++atom) atom_width_.push_back(0);
        for (int byte = 0; byte < 256; ++byte) ++atom_width_[tables_.atoms.atom_of_byte[byte]];
        atom_children_.resize(static_cast<size_t>(tables_.atoms.count()));
        const auto [first, last] = trie_->children(0);
        for (const TrieChild* child = first; child != last; ++child) {
            const size_t position = static_cast<size_t>(child - first);
            ChildSet& set = atom_children_[tables_.atoms.atom_of_byte[child->byte]];
            set[position >> 6] |= uint64_t{1} << (position & 63);
        }
        initial_state_ = full_.push(0, kBottom);
        slice_moves_ = slice_moves_by_class(
            [this](uint8_t byte) { return tables_.atoms.atom_of_byte[byte]; });
    }

    const char* engine() const override { return "dpda"; }
    std::unique_ptr<CfgMatcher> matcher() override;
    bool accepts(const std::string& data) override;

    // A state is a whole stack, interned: its top node in ``full_``.
    int32_t initial_state() override { return initial_state_; }
    int32_t feed_state(int32_t state, std::string_view data) override;
    bool state_accepting(int32_t state) override;
    void fill_state(int32_t state, uint32_t* row) override;

    bool start_precompute(size_t max_bytes) override {
        return worker_.start([this, max_bytes] { precompute(max_bytes); });
    }
    MaskStats mask_stats() const override { return counters_.snapshot(worker_.running()); }

    const LrTables& tables() const { return tables_; }
    int32_t atom_width(int32_t atom) const { return atom_width_[atom]; }

    // The adaptive mask for the stack under ``top`` (``stack`` a matcher's stack), computed
    // on first use (thread-safe: nodes are published complete; only a node's table of longer
    // suffixes grows, and it is read without the lock).
    const StateMask& state_mask(const GrowingStack& stack, int32_t top) {
        SuffixNode* found = roots_[stack.state(top)].load(std::memory_order_acquire);
        if (found == nullptr) found = build(nullptr, suffix_of(stack, top, 1));
        int32_t node = top;
        for (size_t depth = 2; !found->mask; ++depth) {
            node = stack.parent(node);
            const int32_t below = node >= 0 ? stack.state(node) : kBottom;
            SuffixNode* child = found->below.load(std::memory_order_acquire)->find(below);
            found = child ? child : build(found, suffix_of(stack, top, depth));
        }
        return *found->mask;
    }

  private:
    // Throws for a state id ``full_`` never gave out (caller holds ``full_lock_``).
    void check_state(int32_t state) const {
        if (state < 0 || static_cast<size_t>(state) >= full_.size()) {
            throw std::out_of_range("no parse state " + std::to_string(state) + " in this grammar");
        }
    }

    // The states of the ``depth`` entries at the top of the stack, top first (kBottom for
    // the end of the stack).
    static std::vector<int32_t> suffix_of(const GrowingStack& stack, int32_t top, size_t depth) {
        std::vector<int32_t> suffix;
        for (int32_t node = top; suffix.size() < depth; node = stack.parent(node)) {
            if (node < 0) {
                suffix.push_back(kBottom);
                break;
            }
            suffix.push_back(stack.state(node));
        }
        return suffix;
    }

    std::unique_ptr<std::atomic<SuffixNode*>[]> root_slots() const {
        auto slots = std::make_unique<std::atomic<SuffixNode*>[]>(static_cast<size_t>(tables_.states));
        for (int32_t state = 0; state < tables_.states; ++state) {
            slots[state].store(nullptr, std::memory_order_relaxed);  // published by publish()
        }
        return slots;
    }

    // The published node of ``suffix`` under ``parent`` (nullptr: the root of its top state),
    // or nullptr.
    SuffixNode* find(SuffixNode* parent, const std::vector<int32_t>& suffix) const {
        return parent ? parent->below.load(std::memory_order_acquire)->find(suffix.back())
                      : roots_[suffix.front()].load(std::memory_order_acquire);
    }

    // A request's build of the node of ``suffix`` (top state first; kBottom last if the stack
    // ends there): a root when ``parent`` is nullptr, else ``parent``'s child for the
    // suffix's last state. Requests build one at a time in the shared local view; the worker
    // never holds that lock, and a node it publishes meanwhile is taken instead.
    SuffixNode* build(SuffixNode* parent, const std::vector<int32_t>& suffix) {
        hint_.store(suffix.front(), std::memory_order_relaxed);
        std::lock_guard<std::mutex> guard(build_lock_);
        if (SuffixNode* found = find(parent, suffix)) return found;
        return publish(parent, suffix, compute(view_, suffix), false, 0);
    }

    // The mask of ``suffix`` computed in ``view``, or nullptr when the suffix is to be split
    // by the state below it. Touches nothing shared but the vocabulary's caches, which lock.
    std::unique_ptr<StateMask> compute(LocalView& view, const std::vector<int32_t>& suffix) const {
        const bool complete = suffix.back() == kBottom;
        const size_t states = suffix.size() - (complete ? 1 : 0);
        std::vector<int32_t> chain(states);  // interned nodes of the suffix, index = depth
        int32_t base = complete ? kBottom : kUnknownBelow;
        for (size_t depth = states; depth-- > 0;) {
            chain[depth] = base = view.stack.push(suffix[depth], base);
        }
        LocalStep step{tables_, view, slice_moves_};
        const bool may_deepen = !complete && static_cast<int32_t>(suffix.size()) < kMaxSuffix;
        const FirstByteCount count = count_first_bytes(*trie_, step, chain[0], first_children(suffix[0]));
        bool deepen = may_deepen && count.dependent > kDeepenAbove;
        WalkPlan plan;
        if (!deepen) {
            plan = plan_walk(*trie_, step, chain[0], count);
            deepen = may_deepen && large_walk_needs_context(count, plan);
        }
        if (deepen) return nullptr;  // hopeless without more context: do not even walk
        StateMask mask = build_state_mask(*trie_, step, chain[0], count, plan);
        if (may_deepen && mask.undecided_tokens > kDeepenAbove) return nullptr;
        attach_contexts(mask, chain, view.stack);
        return std::make_unique<StateMask>(std::move(mask));
    }

    // Publish the node of ``suffix`` with ``mask`` (nullptr: split by the state below) under
    // ``parent``, unless one was published first (first writer wins: that one is returned).
    // The lock is held for the lookup and the insertion only. A worker's node is dropped, and
    // nullptr returned, when it would take the worker's masks past ``max_bytes``.
    SuffixNode* publish(SuffixNode* parent, const std::vector<int32_t>& suffix,
                        std::unique_ptr<StateMask> mask, bool by_worker, size_t max_bytes) {
        auto node = std::make_unique<SuffixNode>();
        size_t bytes = sizeof(SuffixNode) + (mask ? mask->bytes() : 0);
        std::unique_ptr<BelowTable> below;
        if (mask) {
            node->mask = std::move(mask);
        } else {
            below = std::make_unique<BelowTable>(4);
            bytes += below->bytes();
            node->below.store(below.get(), std::memory_order_relaxed);  // published with the node
        }
        std::lock_guard<std::mutex> guard(publish_lock_);
        if (SuffixNode* found = find(parent, suffix)) return found;
        BelowTable* table = parent ? parent->below.load(std::memory_order_relaxed) : nullptr;
        std::unique_ptr<BelowTable> grown = table && table->full() ? table->grown() : nullptr;
        if (grown) bytes += grown->bytes();
        if (by_worker && counters_.worker_bytes() + bytes > max_bytes) return nullptr;
        counters_.add(by_worker, bytes);
        if (below) tables_owned_.push_back(std::move(below));
        SuffixNode* published = owned_.emplace_back(std::move(node)).get();
        if (parent == nullptr) {
            roots_[suffix.front()].store(published, std::memory_order_release);
        } else if (grown) {
            grown->insert(suffix.back(), published);
            parent->below.store(grown.get(), std::memory_order_release);
            tables_owned_.push_back(std::move(grown));
        } else {
            table->insert(suffix.back(), published);
        }
        return published;
    }

    // The worker: every state's root suffix, in the frontier's order, then the longer
    // suffixes of those that split, up to kPrecomputeSuffix states, until all are built or
    // the grammar is dropped. Roots come first because a split root's longer suffixes are
    // one per state that can lie below it, and most of them no decode meets: an LALR(1)
    // state shared by many contexts has dozens. It never publishes a node that would take
    // its masks past ``max_bytes``, and stops once its masks and its scratch view together
    // reach it (checked after each node). Between two states it turns to where a request
    // last built a node itself.
    void precompute(size_t max_bytes) {
        LocalView view;
        LrFrontier frontier(tables_);
        std::vector<int32_t> split;  // states whose root suffix splits, in the order reached
        while (!worker_.stopping()) {
            const int32_t hint = hint_.exchange(-1, std::memory_order_relaxed);
            if (hint >= 0) frontier.jump_to(hint);
            const int32_t state = frontier.next();
            if (state < 0) break;
            if (!precompute_state(state, view, frontier, max_bytes, 1)) return;
            if (!find(nullptr, {state})->mask) split.push_back(state);
        }
        for (int32_t state : split) {
            if (worker_.stopping()) return;
            const int32_t hint = hint_.exchange(-1, std::memory_order_relaxed);
            if (hint >= 0 && !precompute_state(hint, view, frontier, max_bytes, kPrecomputeSuffix)) return;
            if (!precompute_state(state, view, frontier, max_bytes, kPrecomputeSuffix)) return;
        }
    }

    // Build the nodes of ``state``'s suffixes of at most ``longest`` states that the worker
    // covers (breadth-first by length); false when the worker is to stop.
    bool precompute_state(int32_t state, LocalView& view, LrFrontier& frontier, size_t max_bytes,
                          size_t longest) {
        std::deque<std::pair<SuffixNode*, std::vector<int32_t>>> agenda;
        agenda.push_back({nullptr, {state}});
        while (!agenda.empty()) {
            if (worker_.stopping()) return false;
            auto [parent, suffix] = std::move(agenda.front());
            agenda.pop_front();
            SuffixNode* node = find(parent, suffix);
            if (node == nullptr) {
                node = publish(parent, suffix, compute(view, suffix), true, max_bytes);
                if (node == nullptr) return false;
                // The view is scratch (a published mask does not refer to it): cleared when
                // it passes a quarter of the budget rather than stopping the worker.
                if (view.bytes() > max_bytes / 4) view.clear();
                if (counters_.worker_bytes() + view.bytes() > max_bytes) return false;
            }
            if (node->mask || suffix.size() >= longest) continue;
            const int32_t last = suffix.back();
            std::vector<int32_t> below = frontier.predecessors(last);
            if (last == 0) below.push_back(kBottom);
            for (int32_t state_below : below) {
                std::vector<int32_t> longer = suffix;
                longer.push_back(state_below);
                agenda.push_back({node, std::move(longer)});
            }
        }
        return true;
    }

    // Memoised local-view transitions over a view's interned stacks.
    struct LocalStep {
        const LrTables& tables;
        LocalView& view;
        const SliceMoves& moves;  // the string slice's moves, by this grammar's atoms
        int32_t operator()(int32_t config, uint8_t byte) {
            const size_t atoms = static_cast<size_t>(tables.atoms.count());
            const size_t slot = static_cast<size_t>(config) * atoms + tables.atoms.atom_of_byte[byte];
            if (view.memo.size() <= slot) extend_memo();
            int32_t next = view.memo[slot];
            if (next == kUnset) {
                next = lr_step(tables, view.stack, config, tables.atoms.atom_of_byte[byte], view.pending);
                view.memo[slot] = next;
            }
            return next;
        }

        const SliceMoves& slice_moves() const { return moves; }
        bool slice_pair_closed(uint64_t pair) const { return view.slice_closed.find(pair) >= 0; }
        void close_slice_pairs(const std::vector<uint64_t>& pairs) {
            for (uint64_t pair : pairs) view.slice_closed.try_emplace(pair, 0);
        }

        // ``config``'s top ``depth`` states over an unknown rest (``config`` itself when it
        // holds no more): what the product of the string slice is explored on.
        int32_t top_view(int32_t config, size_t depth) {
            std::array<int32_t, kMaxView> states;
            int32_t node = config;
            for (size_t kept = 0; kept < depth; ++kept) {
                if (node < 0 || kept == kMaxView) return config;
                states[kept] = view.stack.state(node);
                node = view.stack.parent(node);
            }
            if (node < 0) return config;
            int32_t top = kUnknownBelow;
            for (size_t kept = depth; kept-- > 0;) top = view.stack.push(states[kept], top);
            return top;
        }

        // Give every interned configuration without one a memo row. The atoms its top state
        // rejects are filled in from the ACTION row at once: a first visit would otherwise
        // step them one by one, each a separate look at that row.
        void extend_memo() {
            const size_t atoms = static_cast<size_t>(tables.atoms.count());
            size_t config = view.memo.size() / atoms;
            view.memo.resize(view.stack.size() * atoms);
            for (; config < view.stack.size(); ++config) {
                const size_t state = static_cast<size_t>(view.stack.state(static_cast<int32_t>(config)));
                const int32_t* actions = tables.action.data() + state * atoms;
                int32_t* row = view.memo.data() + config * atoms;
                for (size_t atom = 0; atom < atoms; ++atom) {
                    row[atom] = actions[atom] == kActionError ? kDead : kUnset;
                }
            }
        }
    };

    // The root's children whose first byte ``state``'s ACTION row does not reject: the only
    // ones a first visit steps.
    ChildSet first_children(int32_t state) const {
        const size_t atoms = static_cast<size_t>(tables_.atoms.count());
        const int32_t* actions = tables_.action.data() + static_cast<size_t>(state) * atoms;
        ChildSet set{};
        for (size_t atom = 0; atom < atoms; ++atom) {
            if (actions[atom] == kActionError) continue;
            for (size_t word = 0; word < set.size(); ++word) set[word] |= atom_children_[atom][word];
        }
        return set;
    }

    // Undecided entries carry where their local configuration joins the suffix (a depth
    // below the top) and the states it pushed above that point, bottom first: a fill rebuilds
    // it over the real stack without the interned stacks, which other threads may be growing.
    static void attach_contexts(StateMask& mask, const std::vector<int32_t>& chain,
                                const InternedStack& local) {
        std::unordered_map<int32_t, int32_t> offsets;
        for (StateMask::Undecided& entry : mask.undecided) {
            auto [found, inserted] =
                offsets.emplace(entry.config, static_cast<int32_t>(mask.contexts.size()));
            if (inserted) {
                std::vector<int32_t> pushed;
                int32_t node = entry.config;
                auto joined = std::find(chain.begin(), chain.end(), node);
                while (joined == chain.end()) {
                    pushed.push_back(local.state(node));
                    node = local.parent(node);
                    joined = std::find(chain.begin(), chain.end(), node);
                }
                mask.contexts.push_back(static_cast<int32_t>(joined - chain.begin()));
                mask.contexts.push_back(static_cast<int32_t>(pushed.size()));
                mask.contexts.insert(mask.contexts.end(), pushed.rbegin(), pushed.rend());
            }
            entry.config = found->second;
        }
    }

    LrTables tables_;
    std::vector<int32_t> atom_width_;
    std::vector<ChildSet> atom_children_;  // the root's children by the atom of their byte
    SliceMoves slice_moves_;                // the string slice's moves, one byte per atom run
    std::unique_ptr<std::atomic<SuffixNode*>[]> roots_;
    std::mutex build_lock_;    // requests' builds, one at a time in ``view_``
    std::mutex publish_lock_;  // insertions into the suffix tree (held for those only)
    std::deque<std::unique_ptr<SuffixNode>> owned_;
    std::deque<std::unique_ptr<BelowTable>> tables_owned_;  // every table, replaced ones too
    LocalView view_;
    MaskCounters counters_;
    std::atomic<int32_t> hint_{-1};  // the top state of a request's latest build
    // The whole stacks of the shared states, under their own lock: a stack costs a node
    // (8 bytes, and its index entry) per entry that no earlier stack shares.
    std::mutex full_lock_;
    InternedStack full_;
    std::vector<int32_t> full_pending_;
    int32_t initial_state_ = 0;
    BackgroundWorker worker_;        // last: stopped and joined before the rest is destroyed
};

class DpdaMatcher final : public CfgMatcher {
  public:
    explicit DpdaMatcher(std::shared_ptr<DpdaGrammar> grammar) : DpdaMatcher(std::move(grammar), {0}) {}

    // A matcher over the stack of ``states`` (bottom first), as if it had read a text that
    // leaves them.
    DpdaMatcher(std::shared_ptr<DpdaGrammar> grammar, const std::vector<int32_t>& states)
        : grammar_(std::move(grammar)) {
        int32_t top = kBottom;
        for (int32_t state : states) top = stack_.push(state, top);
        history_.push_back({top, stack_.size()});
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
        for (int32_t base : resolved_.bases) {
            if (base >= static_cast<int32_t>(stack_.size())) resolved_.mask = nullptr;
        }
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
        const StateMask& mask = grammar_->state_mask(stack_, top);
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
    //
    // What the walks accept depends only on the mask and on the stack below the depth where
    // each of its contexts joins the real stack, and the node there names that stack (a
    // matcher's nodes change only when a rollback truncates them). So a fill of the same mask
    // over the same nodes, as every token along a string's text is, sets the tokens the last
    // walk found instead of walking again.
    void resolve(const StateMask& mask, int32_t top, uint32_t* row) {
        bases_.clear();
        for (size_t offset = 0; offset < mask.contexts.size();
             offset += 2 + static_cast<size_t>(mask.contexts[offset + 1])) {
            int32_t base = top;
            for (int32_t depth = 0; depth < mask.contexts[offset]; ++depth) base = stack_.parent(base);
            bases_.push_back(base);
        }
        if (resolved_.mask == &mask && resolved_.bases == bases_) {
            for (int32_t token : resolved_.tokens) set_token(row, token);
            return;
        }
        resolved_.mask = nullptr;
        resolved_.tokens.clear();
        walk_undecided(mask, top, row);
        resolved_.mask = &mask;
        std::swap(resolved_.bases, bases_);
    }

    // The walks themselves: each undecided subtree from its context rebuilt over the real
    // stack, the tokens they accept set in ``row`` and kept in ``resolved_``.
    void walk_undecided(const StateMask& mask, int32_t top, uint32_t* row) {
        const size_t mark = stack_.size();
        FullStep step{*this};
        RowWalker<FullStep> walker(*mask.undecided_trie, step, row, frames_, &resolved_.tokens);
        int32_t context = -1;
        int32_t parent = top;
        for (const StateMask::Undecided& entry : mask.undecided) {
            if (entry.config != context) {
                stack_.truncate(mark);
                context = entry.config;
                const int32_t* where = mask.contexts.data() + context;
                parent = top;
                for (int32_t depth = 0; depth < where[0]; ++depth) parent = stack_.parent(parent);
                for (int32_t i = 0; i < where[1]; ++i) parent = stack_.push(where[2 + i], parent);
            }
            walker.resolve(entry.node, parent, mask.undecided_trie->byte(entry.node));
        }
        stack_.truncate(mark);
    }

    // The last resolution: its mask, the real node each of the mask's contexts joined at,
    // and the tokens its walks accepted.
    struct Resolution {
        const StateMask* mask = nullptr;
        std::vector<int32_t> bases;
        std::vector<int32_t> tokens;
    };

    std::shared_ptr<DpdaGrammar> grammar_;
    GrowingStack stack_;
    std::vector<Entry> history_;
    std::vector<int32_t> pending_;
    WalkScratch frames_;
    Resolution resolved_;
    std::vector<int32_t> bases_;  // scratch: the current fill's joining nodes
};

std::unique_ptr<CfgMatcher> DpdaGrammar::matcher() {
    return std::make_unique<DpdaMatcher>(std::static_pointer_cast<DpdaGrammar>(shared_from_this()));
}

bool DpdaGrammar::accepts(const std::string& data) {
    DpdaMatcher matcher(std::static_pointer_cast<DpdaGrammar>(shared_from_this()));
    return matcher.accept_bytes(data) && matcher.is_accepting();
}

int32_t DpdaGrammar::feed_state(int32_t state, std::string_view data) {
    std::lock_guard<std::mutex> guard(full_lock_);
    check_state(state);
    for (const char byte : data) {
        state = lr_step(tables_, full_, state, tables_.atoms.atom_of_byte[static_cast<uint8_t>(byte)],
                        full_pending_);
        if (state < 0) return kDead;
    }
    return state;
}

bool DpdaGrammar::state_accepting(int32_t state) {
    std::lock_guard<std::mutex> guard(full_lock_);
    check_state(state);
    return lr_step(tables_, full_, state, tables_.atoms.end_atom, full_pending_, false) == kAccepted;
}

// The mask comes from a matcher over a copy of the state's stack: the masks and their
// resolution read the stack without ``full_lock_``, which other callers may be growing.
void DpdaGrammar::fill_state(int32_t state, uint32_t* row) {
    std::vector<int32_t> states;
    {
        std::lock_guard<std::mutex> guard(full_lock_);
        check_state(state);
        for (int32_t node = state; node >= 0; node = full_.parent(node)) states.push_back(full_.state(node));
    }
    std::reverse(states.begin(), states.end());
    DpdaMatcher(std::static_pointer_cast<DpdaGrammar>(shared_from_this()), states).fill_bitmask(row);
}

}  // namespace

std::shared_ptr<CompiledCfg> make_dpda(LrTables tables, std::shared_ptr<const TokenTrie> trie) {
    return std::make_shared<DpdaGrammar>(std::move(tables), std::move(trie));
}

}  // namespace cad::cfg
