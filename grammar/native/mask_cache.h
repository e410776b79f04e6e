// Adaptive token-mask caches: per parser state, the vocabulary split into accepted, rejected
// and undecided tokens once, so that a mask at run time copies the accepted part and walks
// only the undecided few (XGrammar's adaptive token mask cache, keyed here on an engine's
// context-independent local state).
//
// A state's mask is computed by walking the token trie from the state's *local* view (the
// DPDA's stack suffix over an unknown rest; Earley's newest sets with older origins unknown).
// A byte the local view cannot judge (it would pop or complete into the unknown part) makes
// the whole subtree under it undecided: the cache keeps the trie node and the local
// configuration it was reached from, and the fill resumes the walk there with the real
// context. Walks through regions that recur across grammars (strings, free text) come from
// the vocabulary's RegionCache.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <map>
#include <vector>

#include "bitmask.h"
#include "flat_index.h"
#include "region_cache.h"
#include "token_trie.h"
#include "trie_walk.h"

namespace cad {

struct StateMask {
    struct Undecided {
        uint32_t node;   // the trie node whose byte the local view could not judge
        int32_t config;  // the local configuration of its parent
    };
    TokenList accepted;
    std::vector<Undecided> undecided;
    const TokenTrie* undecided_trie = nullptr;  // whose nodes ``undecided`` names (the walked one)
    size_t undecided_tokens = 0;                // tokens under the undecided subtrees
    std::vector<int32_t> contexts;  // what an engine needs to rebuild undecided configs

    void write(uint32_t* row, size_t words) const { accepted.write(row, words); }
    // The memory the mask holds (what a cache's budget counts).
    size_t bytes() const {
        return sizeof(StateMask) + accepted.bits.capacity() * sizeof(uint32_t) +
               accepted.ids.capacity() * sizeof(int32_t) + undecided.capacity() * sizeof(Undecided) +
               contexts.capacity() * sizeof(int32_t);
    }
};

struct FirstByteCount;

// Walks the trie from local configurations with a memoised ``Step`` (an object with
// ``int32_t operator()(int32_t config, uint8_t byte)``) and collects a StateMask.
template <class Step>
class MaskBuilder {
  public:
    MaskBuilder(const TokenTrie& trie, Step& step)
        : trie_(&trie), step_(step), words_(bitmask_words(trie.vocab_size())) {
        mask_.undecided_trie = &trie;
    }

    // Judge every token below ``node`` from ``config`` (the configuration at ``node``).
    void walk(uint32_t node, int32_t config) { walk_subtree(*trie_, node, config, *this, frames_); }
    // Judge every token from ``config`` at the root, whose children's steps ``count`` holds.
    void walk_root(int32_t config, const FirstByteCount& count);
    // Walk ``other`` (a trie over the same vocabulary) from its root instead: the undecided
    // entries then name its nodes.
    void walk_other(const TokenTrie& other, int32_t config) {
        trie_ = &other;
        mask_.undecided_trie = &other;
        walk(0, config);
    }
    // The tokens that end at ``node`` are accepted.
    void take(uint32_t node) {
        for (const int32_t* id = trie_->tokens_begin(node); id != trie_->tokens_end(node); ++id) {
            add(*id);
        }
    }
    void take(const TokenList& tokens) {
        if (tokens.bits.empty()) {
            for (int32_t token : tokens.ids) add(token);
            return;
        }
        if (row_.empty() && ids_.empty()) {  // the first set taken: a copy, nothing to count
            row_ = tokens.bits;
            count_ = tokens.count;
            return;
        }
        use_row();
        for (size_t word = 0; word < words_; ++word) {
            count_ += static_cast<size_t>(__builtin_popcount(tokens.bits[word] & ~row_[word]));
            row_[word] |= tokens.bits[word];
        }
    }
    StateMask finish() {
        if (row_.empty()) {
            mask_.accepted.ids = std::move(ids_);  // ids are distinct: every node is taken once
        } else {
            mask_.accepted = TokenList::from_row(std::move(row_), count_);
        }
        return std::move(mask_);
    }

    int32_t step(int32_t config, uint8_t byte) { return step_(config, byte); }
    bool descend(int32_t) const { return true; }
    void accept(uint32_t node, int32_t) { take(node); }
    void dependent(uint32_t node, int32_t config) {
        mask_.undecided.push_back({node, config});
        mask_.undecided_tokens += trie_->subtree_tokens(node);
    }
    size_t mark() const { return 0; }
    void release(size_t) {}

  private:
    // Accepted tokens are collected as ids until there are enough of them for a row to be
    // the cheaper form.
    void add(int32_t token) {
        if (row_.empty()) {
            ids_.push_back(token);
            if (ids_.size() * 8 <= words_) return;
            use_row();
            return;
        }
        uint32_t& word = row_[static_cast<uint32_t>(token) >> 5];
        const uint32_t bit = 1u << (static_cast<uint32_t>(token) & 31);
        count_ += (word & bit) ? 0 : 1;
        word |= bit;
    }
    void use_row() {
        if (!row_.empty()) return;
        row_.assign(words_, 0u);
        for (int32_t token : ids_) set_token(row_.data(), token);
        count_ = ids_.size();
        ids_.clear();
    }

    const TokenTrie* trie_;
    Step& step_;
    StateMask mask_;
    size_t words_;
    std::vector<int32_t> ids_;
    std::vector<uint32_t> row_;
    size_t count_ = 0;
    WalkScratch frames_;
};

// Sets the bits of the tokens a full-context walk reaches; ``Step`` as for MaskBuilder plus
// ``size_t mark()`` / ``void release(size_t)`` for the scratch its configurations use. With
// ``taken``, every token whose bit it sets is also appended there.
template <class Step>
class RowWalker {
  public:
    RowWalker(const TokenTrie& trie, Step& step, uint32_t* row, WalkScratch& frames,
              std::vector<int32_t>* taken = nullptr)
        : trie_(trie), step_(step), row_(row), frames_(frames), taken_(taken) {}

    // Judge the undecided subtree of ``node`` from ``parent_config`` (its parent's real
    // configuration).
    void resolve(uint32_t node, int32_t parent_config, uint8_t byte) {
        const size_t before = step_.mark();
        const int32_t config = step_(parent_config, byte);
        if (config >= 0) {
            accept(node, config);
            walk_subtree(trie_, node, config, *this, frames_);
        }
        step_.release(before);
    }

    int32_t step(int32_t config, uint8_t byte) {
        const int32_t next = step_(config, byte);
        return next == kDependent ? kDead : next;
    }
    bool descend(int32_t) const { return true; }
    void accept(uint32_t node, int32_t) {
        for (const int32_t* id = trie_.tokens_begin(node); id != trie_.tokens_end(node); ++id) {
            set_token(row_, *id);
        }
        if (taken_) taken_->insert(taken_->end(), trie_.tokens_begin(node), trie_.tokens_end(node));
    }
    void dependent(uint32_t, int32_t) {}
    size_t mark() const { return step_.mark(); }
    void release(size_t mark) { step_.release(mark); }

  private:
    const TokenTrie& trie_;
    Step& step_;
    uint32_t* row_;
    WalkScratch& frames_;
    std::vector<int32_t>* taken_;
};

// A region of a local automaton around a root configuration: the configurations reachable
// from the root without passing a configuration that could look below the local view (those
// are the exits). ``key`` is its transition table in canonical (breadth-first) numbering:
// what makes two regions, of any grammars, walk the trie alike.
struct Region {
    std::vector<int32_t> configs;  // region configurations, root first
    std::vector<int32_t> exits;    // exit configurations
    std::vector<int32_t> key;
};

constexpr size_t kMaxRegion = 64;

// The minimal form of a region's table (``count`` configurations of 256 targets each: a
// configuration index, an exit as -100 - k, or a rejection), numbered breadth-first from
// the root and prefixed by its size, so that regions whose configurations differ only in how
// much of the stack they show, and walk the trie alike, share one key. Exits are renumbered
// in the order the key first names them; ``exit_order[k]`` is new exit k's old index.
inline std::vector<int32_t> minimal_table(const std::vector<int32_t>& table, size_t count,
                                          std::vector<int32_t>& exit_order) {
    std::vector<int32_t> block(count, 0);  // every configuration accepts: one block to start
    for (size_t blocks = 1;;) {
        std::map<std::vector<int32_t>, int32_t> signatures;
        std::vector<int32_t> refined(count);
        for (size_t config = 0; config < count; ++config) {
            std::vector<int32_t> signature{block[config]};
            for (size_t byte = 0; byte < 256; ++byte) {
                const int32_t target = table[config * 256 + byte];
                signature.push_back(target >= 0 ? block[static_cast<size_t>(target)] : target - 1000);
            }
            refined[config] =
                signatures.emplace(std::move(signature), static_cast<int32_t>(signatures.size()))
                    .first->second;
        }
        block = std::move(refined);
        if (signatures.size() == blocks) break;
        blocks = signatures.size();
    }
    std::vector<int32_t> number(count, -1);  // block -> canonical number (breadth-first)
    std::vector<size_t> order{0};             // one representative configuration per block
    number[static_cast<size_t>(block[0])] = 0;
    for (size_t next = 0; next < order.size(); ++next) {
        for (size_t byte = 0; byte < 256; ++byte) {
            const int32_t target = table[order[next] * 256 + byte];
            if (target < 0) continue;
            int32_t& id = number[static_cast<size_t>(block[static_cast<size_t>(target)])];
            if (id < 0) {
                id = static_cast<int32_t>(order.size());
                order.push_back(static_cast<size_t>(target));
            }
        }
    }
    std::vector<int32_t> key{static_cast<int32_t>(order.size())};
    std::vector<int32_t> exit_number;  // by old exit index, -1 until first referenced
    exit_order.clear();
    for (size_t representative : order) {
        for (size_t byte = 0; byte < 256; ++byte) {
            const int32_t target = table[representative * 256 + byte];
            if (target >= 0) {
                key.push_back(number[static_cast<size_t>(block[static_cast<size_t>(target)])]);
            } else if (target <= -100) {
                const size_t old_exit = static_cast<size_t>(-100 - target);
                if (exit_number.size() <= old_exit) exit_number.resize(old_exit + 1, -1);
                if (exit_number[old_exit] < 0) {
                    exit_number[old_exit] = static_cast<int32_t>(exit_order.size());
                    exit_order.push_back(static_cast<int32_t>(old_exit));
                }
                key.push_back(-100 - exit_number[old_exit]);
            } else {
                key.push_back(target);
            }
        }
    }
    return key;
}

// Which configurations of a region's graph (``targets``: the distinct live successors of
// each; exits have none) can reach a cycle of it.
inline std::vector<bool> reaches_cycle(const std::vector<std::vector<size_t>>& targets) {
    const size_t count = targets.size();
    std::vector<bool> cyclic(count, false);
    for (size_t start = 0; start < count; ++start) {  // on a cycle: reaches itself again
        std::vector<bool> seen(count, false);
        std::vector<size_t> agenda(targets[start]);
        while (!agenda.empty() && !cyclic[start]) {
            const size_t config = agenda.back();
            agenda.pop_back();
            if (seen[config]) continue;
            seen[config] = true;
            cyclic[start] = config == start;
            agenda.insert(agenda.end(), targets[config].begin(), targets[config].end());
        }
    }
    std::vector<bool> reaches(cyclic);
    for (bool changed = true; changed;) {  // and whatever can reach a cyclic one
        changed = false;
        for (size_t config = 0; config < count; ++config) {
            if (reaches[config]) continue;
            for (size_t target : targets[config]) {
                if (reaches[target]) {
                    reaches[config] = changed = true;
                    break;
                }
            }
        }
    }
    return reaches;
}

// Explore the region around ``root``; false if the root itself is an exit or the region (or
// its exits) outgrow kMaxRegion.
template <class Step>
bool explore_region(Step& step, int32_t root, Region& region) {
    std::vector<int32_t> row(256);
    std::vector<int32_t> order{root};  // every live configuration seen, in discovery order
    FlatIndex seen(2 * kMaxRegion);      // configuration -> its place in ``order``
    seen.try_emplace(static_cast<uint32_t>(root), 0);
    std::vector<std::vector<int32_t>> rows;
    std::vector<std::vector<size_t>> targets;  // distinct live successors, by place in order
    std::vector<bool> is_exit;
    auto index_of = [&seen](int32_t config) { return seen.find(static_cast<uint32_t>(config)); };
    for (size_t next = 0; next < order.size(); ++next) {
        bool exit = false;  // an exit's row is not needed: stop at its first undecided byte
        for (int byte = 0; byte < 256 && !exit; ++byte) {
            row[byte] = step(order[next], static_cast<uint8_t>(byte));
            exit = row[byte] == kDependent;
        }
        if (exit && next == 0) return false;
        is_exit.push_back(exit);
        rows.push_back(row);
        std::vector<size_t>& successors = targets.emplace_back();
        if (exit) continue;
        int32_t previous = kDead;  // bytes of one atom lead to one target: look it up once
        for (int32_t target : row) {
            if (target < 0 || target == previous) continue;
            previous = target;
            const auto [place, inserted] =
                seen.try_emplace(static_cast<uint32_t>(target), static_cast<int32_t>(order.size()));
            if (inserted) {
                if (order.size() >= 2 * kMaxRegion) return false;
                order.push_back(target);
            }
            const size_t j = static_cast<size_t>(place);
            if (std::find(successors.begin(), successors.end(), j) == successors.end()) {
                successors.push_back(j);
            }
        }
    }
    // What cannot lead back into a loop of the region (what follows a closing quote or the
    // end of a name) is the grammar's context, not the region: those configurations become
    // exits, walked per grammar, so one loop in different contexts has one key.
    const std::vector<bool> looping = reaches_cycle(targets);
    if (looping[0]) {
        for (size_t i = 1; i < order.size(); ++i) is_exit[i] = is_exit[i] || !looping[i];
    }
    // Numbering: region configurations and exits each in discovery order.
    std::vector<int32_t> number(order.size());
    for (size_t i = 0; i < order.size(); ++i) {
        std::vector<int32_t>& target = is_exit[i] ? region.exits : region.configs;
        number[i] = static_cast<int32_t>(target.size());
        target.push_back(order[i]);
    }
    if (region.configs.size() > kMaxRegion || region.exits.size() > kMaxRegion) return false;
    std::vector<int32_t> table;  // 256 entries per region configuration, canonical targets
    for (size_t i = 0; i < order.size(); ++i) {
        if (is_exit[i]) continue;
        for (int32_t target : rows[i]) {
            if (target < 0) {
                table.push_back(target);
                continue;
            }
            const size_t j = static_cast<size_t>(index_of(target));
            table.push_back(is_exit[j] ? -100 - number[j] : number[j]);
        }
    }
    std::vector<int32_t> exit_order;
    region.key = minimal_table(table, region.configs.size(), exit_order);
    std::vector<int32_t> exits;  // the referenced exits, in the key's order
    for (int32_t old_exit : exit_order) exits.push_back(region.exits[static_cast<size_t>(old_exit)]);
    region.exits = std::move(exits);
    return true;
}

// The walk of ``region`` from its root: the tokens that stay inside and the exits. It steps
// through the region's own canonical table (``key``), not the grammar: what is cached under
// the key is then a function of the key alone, and a step is one load from a small table.
inline RegionMask walk_region(const TokenTrie& trie, const Region& region) {
    constexpr int32_t kExitBase = 1 << 24;  // exit k is walked as kExitBase + k (not descended)
    struct Walker {
        const TokenTrie& trie;
        const int32_t* table;  // 256 entries per region configuration
        RegionMask mask;
        std::vector<uint32_t> row;
        size_t count = 0;
        int32_t step(int32_t config, uint8_t byte) const {
            const int32_t target = table[(static_cast<size_t>(config) << 8) | byte];
            return target <= -100 ? kExitBase - 100 - target : target;
        }
        bool descend(int32_t config) const { return config < kExitBase; }
        void accept(uint32_t node, int32_t config) {
            if (config >= kExitBase) {
                mask.exits.push_back({node, config - kExitBase});
                return;
            }
            for (const int32_t* id = trie.tokens_begin(node); id != trie.tokens_end(node); ++id) {
                uint32_t& word = row[static_cast<uint32_t>(*id) >> 5];
                const uint32_t bit = 1u << (static_cast<uint32_t>(*id) & 31);
                count += (word & bit) ? 0 : 1;
                word |= bit;
            }
        }
        void dependent(uint32_t, int32_t) {}
        size_t mark() const { return 0; }
        void release(size_t) {}
    } walker{trie, region.key.data() + 1, {}, std::vector<uint32_t>(bitmask_words(trie.vocab_size()), 0u)};
    WalkScratch frames;
    walk_subtree(trie, 0, 0, walker, frames);
    walker.mask.inside = TokenList::from_row(std::move(walker.row), walker.count);
    return std::move(walker.mask);
}

// A set of the root's children, by their position in its list (at most 256).
using ChildSet = std::array<uint64_t, 4>;

inline ChildSet all_children(const TokenTrie& trie) {
    ChildSet set{};
    const auto [first, last] = trie.children(0);
    for (size_t position = 0; position < static_cast<size_t>(last - first); ++position) {
        set[position >> 6] |= uint64_t{1} << (position & 63);
    }
    return set;
}

// Tokens by the outcome of their first byte from ``root``: how many the walk would judge at
// all (a cost estimate) and how many the local view cannot judge from their first byte on.
struct FirstByteCount {
    size_t reachable = 0;
    size_t dependent = 0;
    size_t live_count = 0;
    std::array<uint8_t, 256> live{};  // list positions of the children not rejected, ascending
    std::array<int32_t, 256> next{};  // their steps, by list position
};

// Step the root's children in ``candidates`` from ``root``; the others are rejected without
// a step (an engine that knows from its tables which first bytes cannot live passes only the
// rest, so a sparse state does not step all of the root's children).
template <class Step>
FirstByteCount count_first_bytes(const TokenTrie& trie, Step& step, int32_t root,
                                 const ChildSet& candidates) {
    FirstByteCount count;
    const TrieChild* first = trie.children(0).first;
    for (size_t word = 0; word < candidates.size(); ++word) {
        for (uint64_t bits = candidates[word]; bits; bits &= bits - 1) {
            const size_t position = word * 64 + static_cast<size_t>(__builtin_ctzll(bits));
            const TrieChild& child = first[position];
            const int32_t next = step(root, child.byte);
            if (next == kDead) continue;
            count.next[position] = next;
            count.live[count.live_count++] = static_cast<uint8_t>(position);
            count.reachable += child.tokens;
            if (next == kDependent) count.dependent += child.tokens;
        }
    }
    return count;
}

template <class Step>
void MaskBuilder<Step>::walk_root(int32_t config, const FirstByteCount& count) {
    const TrieChild* first = trie_->children(0).first;
    for (size_t i = 0; i < count.live_count; ++i) {
        const uint8_t position = count.live[i];
        walk_listed_child(*trie_, first[position], config, count.next[position], *this, frames_);
    }
}

// Whether more than ``limit`` tokens survive their first two bytes from ``root`` (stopping as
// soon as they do; ``count`` holds the first bytes' steps). The first byte alone overestimates
// a walk after white space, where nearly every token's first byte (a space) is alive and its
// second byte is not.
template <class Step>
bool reaches_beyond_second_byte(const TokenTrie& trie, Step& step, const FirstByteCount& count,
                                size_t limit) {
    const TrieChild* first = trie.children(0).first;
    size_t reachable = 0;
    for (size_t i = 0; i < count.live_count && reachable <= limit; ++i) {
        const TrieChild& child = first[count.live[i]];
        const int32_t next = count.next[count.live[i]];
        if (next == kDependent) {
            reachable += child.tokens;
            continue;
        }
        reachable += static_cast<size_t>(trie.tokens_end(child.node) - trie.tokens_begin(child.node));
        for_each_child(trie, child.node, [&](const TrieChild& grandchild) {
            if (step(next, grandchild.byte) != kDead) reachable += grandchild.tokens;
            return reachable <= limit;
        });
    }
    return reachable > limit;
}

constexpr size_t kRegionAbove = 16384;  // walks judging more tokens try the caches below
constexpr size_t kSliceBudget = 4096;   // product pairs explored before giving up

// Per slice state, the bytes that stay in the slice with the state each leads to.
using SliceMoves = std::vector<std::vector<std::pair<uint8_t, int>>>;

// TokenSlice::moves() with one byte kept of each run of bytes that lead to the same slice
// state and that ``atom_of`` (a grammar's map from a byte to the class of bytes its parser
// treats alike) maps to one class: the rest step alike, so the product need not step them.
template <class AtomOf>
SliceMoves slice_moves_by_class(AtomOf atom_of) {
    const SliceMoves& moves = TokenSlice::moves();
    SliceMoves merged(moves.size());
    for (size_t state = 0; state < moves.size(); ++state) {
        int32_t last_class = -1;
        int last_next = -1;
        for (const auto& [byte, next] : moves[state]) {
            const int32_t byte_class = atom_of(byte);
            if (byte_class == last_class && next == last_next) continue;
            merged[state].emplace_back(byte, next);
            last_class = byte_class;
            last_next = next;
        }
    }
    return merged;
}

// What exploring the product of the slice and a local automaton found: every slice token
// accepted, some rejected, a step of a view undecided (a deeper view may tell), the budget
// spent (a shallower view may close), or a step from the root itself undecided (nothing
// will tell).
enum class SliceAnswer { kAccepted, kRejected, kUndecided, kExhausted, kRootUndecided };

// Explore the product of the slice automaton and the local automaton from ``root``. With
// ``view`` > 0, each configuration past the root is explored as its top view,
// ``step.top_view(config, depth)``: its top ``view`` states plus the bytes of the character
// read last, which an LR parser reduces only on the byte after it, over an unknown rest.
// With ``view`` 0, configurations are explored as themselves.
//
// A pair whose every continuation an earlier exploration accepted
// (``step.slice_pair_closed``) is not explored again: the states inside a string reach the
// views its opening state closed within a byte. An accepted exploration hands its pairs to
// ``step.close_slice_pairs``. The bytes stepped from a pair are ``step.slice_moves()``:
// the slice's moves, less the bytes the grammar's parser cannot tell apart.
template <class Step>
SliceAnswer explore_slice_product(Step& step, int32_t root, size_t view) {
    const SliceMoves& moves = step.slice_moves();
    struct Pair {
        int state;       // the slice state
        size_t in_char;  // bytes read into the current character
        int32_t config;
    };
    std::vector<Pair> agenda{{0, 0, root}};
    FlatIndex seen;  // (slice state, configuration) pairs explored
    seen.try_emplace(static_cast<uint32_t>(root), 0);
    std::vector<uint64_t> explored{static_cast<uint32_t>(root)};
    while (!agenda.empty()) {
        const Pair pair = agenda.back();
        agenda.pop_back();
        const size_t depth = view + pair.in_char + 1;  // the byte read now is in a character too
        uint64_t previous = ~uint64_t{0};  // bytes of a class lead alike: look a pair up once
        int32_t stepped_before = kDead;
        int32_t next = kDead;
        for (const auto& [byte, next_state] : moves[static_cast<size_t>(pair.state)]) {
            const int32_t stepped = step(pair.config, byte);
            if (stepped == kDead) return SliceAnswer::kRejected;
            if (stepped < 0) return pair.config == root ? SliceAnswer::kRootUndecided : SliceAnswer::kUndecided;
            if (stepped != stepped_before) {  // the bytes of an atom step alike
                next = view > 0 ? step.top_view(stepped, depth) : stepped;
                stepped_before = stepped;
            }
            const uint64_t key = (static_cast<uint64_t>(next_state) << 32) | static_cast<uint32_t>(next);
            if (key == previous) continue;
            previous = key;
            if (seen.try_emplace(key, 0).second && !step.slice_pair_closed(key)) {
                if (seen.size() > kSliceBudget) return SliceAnswer::kExhausted;
                explored.push_back(key);
                agenda.push_back({next_state, next_state == 0 ? 0 : pair.in_char + 1, next});
            }
        }
    }
    step.close_slice_pairs(explored);
    return SliceAnswer::kAccepted;
}

// Whether every token of the string slice is accepted from ``root`` with nothing undecided.
//
// Explored first on the configurations' top views: a view that judges a byte from its top
// states alone judges it alike over any rest, a step that would look below them is
// undecided, and a rejection by a view is a rejection by the configuration, so a yes or no
// from views is exact. Views are what let a key whose characters each push a state (a
// right-recursive rule) finish: as themselves, its configurations differ at every length
// and the product never closes. Two states below the last character's bytes suit both kinds
// of string rule (appending a character to a left-recursive one pops the state below it), so
// they come first. A step those views leave undecided tries three states, then the
// configurations themselves; a spent budget tries one state (a shallower view tells fewer
// pairs apart; a deeper one, more).
template <class Step>
bool accepts_string_slice(Step& step, int32_t root) {
    SliceAnswer answer = explore_slice_product(step, root, 2);
    if (answer == SliceAnswer::kExhausted) {
        answer = explore_slice_product(step, root, 1);
    } else if (answer == SliceAnswer::kUndecided) {
        answer = explore_slice_product(step, root, 3);
        if (answer == SliceAnswer::kUndecided) answer = explore_slice_product(step, root, 0);
    }
    return answer == SliceAnswer::kAccepted;
}

// How the walk from a root is to be done, judged once from its first bytes: whether it is
// large (more than kRegionAbove tokens survive their first two bytes) and, if so, whether the
// root accepts the whole string slice.
struct WalkPlan {
    bool large = false;
    bool slice = false;
};

template <class Step>
WalkPlan plan_walk(const TokenTrie& trie, Step& step, int32_t root, const FirstByteCount& count) {
    WalkPlan plan;
    plan.large = count.reachable > kRegionAbove &&
                 reaches_beyond_second_byte(trie, step, count, kRegionAbove);
    plan.slice = plan.large && accepts_string_slice(step, root);
    return plan;
}

// Whether a large walk could come from the string slice or the region cache if its local view
// could judge every first byte: both serve only such roots, so an engine that can show more
// of the context should rather than walk the whole trie (the end of a name after its second
// word, say, reduces below what the view shows).
inline bool large_walk_needs_context(const FirstByteCount& count, const WalkPlan& plan) {
    return count.dependent > 0 && plan.large && !plan.slice;
}

// The mask of the local view rooted at ``root`` (``count`` its first bytes, ``plan`` their
// judgement): for a large walk, the string slice when the root accepts all of it, else the
// region cache when the root's region is small; otherwise (and for what those leave) by
// walking the trie.
template <class Step>
StateMask build_state_mask(const TokenTrie& trie, Step& step, int32_t root,
                           const FirstByteCount& count, const WalkPlan& plan) {
    MaskBuilder<Step> builder(trie, step);
    if (plan.slice) {
        const TokenSlice& slice = trie.string_slice();
        builder.take(slice.tokens);
        builder.walk_other(*slice.rest, root);
        return builder.finish();
    }
    Region region;
    if (plan.large && explore_region(step, root, region)) {
        std::shared_ptr<const RegionMask> cached = trie.regions().find(region.key);
        if (!cached) cached = trie.regions().insert(region.key, walk_region(trie, region));
        builder.take(cached->inside);
        for (const RegionMask::Exit& exit : cached->exits) {
            builder.take(exit.node);
            builder.walk(exit.node, region.exits[exit.exit]);
        }
    } else {
        builder.walk_root(root, count);
    }
    return builder.finish();
}

}  // namespace cad
