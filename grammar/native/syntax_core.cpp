// Native hot path of the language grammars (cad.grammar.syntax): GLR stacks over LALR(1)
// tables with prefix-conditioned edges, the Python layout layer (NEWLINE, INDENT, DEDENT),
// the viability of a lexeme in progress, and the token-trie walk that fills a packed mask.
// It mirrors grammar/syntax/glr.py, python_layout.py and python_masks.py step for step;
// those stay the reference the tests compare it with.
//
// Memory: stacks, configurations and layout states are interned in flat open-addressing
// tables, and the questions a mask asks about states that are not on the text's path (the
// trie walk, a lexeme's viability, whether the file may end) run in *scratch*: what they
// intern is dropped when the answer is known, so only the states the text passes through
// stay. `reset()` drops every state at once (the caller does so only when no state is held;
// see python_syntax.py), and `entries()` says how much is held.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <unordered_map>
#include <utility>
#include <vector>

namespace py = pybind11;

namespace {

constexpr int kDead = -1;
constexpr int kMaxTokens = 192;
using TokenSet = std::array<uint64_t, 3>;

uint64_t mix(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

// A memo table from 64-bit keys to ints: open addressing with linear probing, at most half
// full, and backward-shift deletion (scratch answers are taken out again). One flat array, so
// growing it moves 16 bytes an entry and nothing is allocated per entry.
class FlatMap {
   public:
    bool find(uint64_t key, int& value) const {
        if (slots_.empty()) return false;
        size_t mask = slots_.size() - 1;
        for (size_t i = mix(key) & mask;; i = (i + 1) & mask) {
            if (slots_[i].key == key) {
                value = slots_[i].value;
                return true;
            }
            if (slots_[i].key == kEmpty) return false;
        }
    }

    // `key` must be absent.
    void insert(uint64_t key, int value) {
        if ((size_ + 1) * 2 > slots_.size()) grow();
        size_t mask = slots_.size() - 1;
        size_t i = mix(key) & mask;
        while (slots_[i].key != kEmpty) i = (i + 1) & mask;
        slots_[i] = {key, value};
        ++size_;
    }

    void erase(uint64_t key) {
        if (slots_.empty()) return;
        size_t mask = slots_.size() - 1;
        size_t i = mix(key) & mask;
        while (slots_[i].key != key) {
            if (slots_[i].key == kEmpty) return;
            i = (i + 1) & mask;
        }
        for (size_t j = (i + 1) & mask; slots_[j].key != kEmpty; j = (j + 1) & mask) {
            size_t home = mix(slots_[j].key) & mask;
            bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
            if (!stays) {
                slots_[i] = slots_[j];
                i = j;
            }
        }
        slots_[i].key = kEmpty;
        --size_;
    }

    void clear() {
        std::vector<Slot>().swap(slots_);
        size_ = 0;
    }

    size_t size() const { return size_; }

   private:
    static constexpr uint64_t kEmpty = ~0ULL;
    struct Slot {
        uint64_t key;
        int value;
    };

    void grow() {
        std::vector<Slot> old;
        old.swap(slots_);
        slots_.assign(old.empty() ? 64 : old.size() * 2, Slot{kEmpty, 0});
        size_ = 0;
        for (const Slot& slot : old) {
            if (slot.key != kEmpty) insert(slot.key, slot.value);
        }
    }

    std::vector<Slot> slots_;
    size_t size_ = 0;
};

// Ids of interned values by their hash; the values themselves live in the caller's arrays,
// which `same(id)` compares with. Same layout and deletion as FlatMap.
class InternIndex {
   public:
    template <class Same>
    int find(uint64_t hash, Same same) const {
        if (slots_.empty()) return -1;
        size_t mask = slots_.size() - 1;
        for (size_t i = hash & mask;; i = (i + 1) & mask) {
            const Slot& slot = slots_[i];
            if (slot.id < 0) return -1;
            if (slot.hash == hash && same(slot.id)) return slot.id;
        }
    }

    void insert(uint64_t hash, int id) {
        if ((size_ + 1) * 2 > slots_.size()) grow();
        size_t mask = slots_.size() - 1;
        size_t i = hash & mask;
        while (slots_[i].id >= 0) i = (i + 1) & mask;
        slots_[i] = {hash, id};
        ++size_;
    }

    void erase(uint64_t hash, int id) {
        if (slots_.empty()) return;
        size_t mask = slots_.size() - 1;
        size_t i = hash & mask;
        while (slots_[i].id != id) {
            if (slots_[i].id < 0) return;
            i = (i + 1) & mask;
        }
        for (size_t j = (i + 1) & mask; slots_[j].id >= 0; j = (j + 1) & mask) {
            size_t home = slots_[j].hash & mask;
            bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
            if (!stays) {
                slots_[i] = slots_[j];
                i = j;
            }
        }
        slots_[i].id = -1;
        --size_;
    }

    void clear() {
        std::vector<Slot>().swap(slots_);
        size_ = 0;
    }

   private:
    struct Slot {
        uint64_t hash;
        int id;
    };

    void grow() {
        std::vector<Slot> old;
        old.swap(slots_);
        slots_.assign(old.empty() ? 64 : old.size() * 2, Slot{0, -1});
        size_ = 0;
        for (const Slot& slot : old) {
            if (slot.id >= 0) insert(slot.hash, slot.id);
        }
    }

    std::vector<Slot> slots_;
    size_t size_ = 0;
};

struct Outcome {
    int pop;                // entries popped below the top; < 0: the input is accepted
    std::vector<int> push;  // states pushed, bottom first
};

struct EdgeTree {
    bool leaf = false;
    std::vector<Outcome> outcomes;
    std::unordered_map<int, EdgeTree*> below;
};

struct Layout {
    int depth;
    int indents;
    int at_start;
    int col;
    int altcol;
    int cont_col;
    int after_cont;
    int config;
    bool operator==(const Layout& other) const {
        return depth == other.depth && indents == other.indents && at_start == other.at_start &&
               col == other.col && altcol == other.altcol && cont_col == other.cont_col &&
               after_cont == other.after_cont && config == other.config;
    }
};

uint64_t layout_hash(const Layout& l) {
    uint64_t h = mix(static_cast<uint64_t>(static_cast<uint32_t>(l.config)) << 32 |
                     static_cast<uint32_t>(l.indents));
    h = mix(h ^ (static_cast<uint64_t>(static_cast<uint32_t>(l.col)) << 32 |
                 static_cast<uint32_t>(l.altcol)));
    return mix(h ^ (static_cast<uint64_t>(static_cast<uint32_t>(l.cont_col)) << 32 |
                    static_cast<uint64_t>(static_cast<uint32_t>(l.depth)) << 2 |
                    static_cast<uint64_t>(l.at_start) << 1 | static_cast<uint64_t>(l.after_cont)));
}

uint64_t stacks_hash(const int* stacks, size_t count) {
    uint64_t h = mix(count);
    for (size_t i = 0; i < count; ++i) h = mix(h ^ static_cast<uint32_t>(stacks[i]));
    return h;
}

uint64_t indent_hash(int col, int altcol, int parent) {
    return mix(mix(static_cast<uint64_t>(static_cast<uint32_t>(col)) << 32 |
                   static_cast<uint32_t>(altcol)) ^
               static_cast<uint32_t>(parent + 1));
}

struct Indent {
    int col;
    int altcol;
    int parent;
    int size;
};

struct Reading {
    std::vector<int> single;
    std::vector<std::vector<int>> longer;
    bool empty;
};

struct Leaf {
    int kind;  // 0: token ids, 1: packed bits
    std::vector<int32_t> ids;
    std::vector<uint8_t> bits;
};

struct Trie {
    std::vector<int> child_offsets;
    std::vector<int> child_events;
    std::vector<int> child_targets;
    std::vector<int> leaf_offsets;
    std::vector<int> leaf_classes;
    std::vector<Leaf> leaves;
};

// The memo tables, by index into SyntaxCore::memos_ (a scratch log names them this way).
enum Memo { kSteps, kGroupSteps, kLayoutSteps, kComplete, kViableClasses, kMemos };

class SyntaxCore {
   public:
    SyntaxCore(py::array_t<int32_t> action_index, py::array_t<int32_t> action_data,
               py::array_t<int32_t> gotos, int states, int tokens, int nonterminals,
               std::vector<int> production_lhs, std::vector<int> production_length, int end_token,
               int accept, std::vector<std::vector<int>> groups, std::vector<int> openers,
               std::vector<int> closers, int layout_base, int run_base, int max_run,
               int newline, int indent, int dedent, int endmarker, int max_depth, int max_indent,
               int tab_size)
        : states_(states),
          tokens_(tokens),
          nonterminals_(nonterminals),
          production_lhs_(std::move(production_lhs)),
          production_length_(std::move(production_length)),
          end_token_(end_token),
          accept_(accept),
          groups_(std::move(groups)),
          count_(static_cast<int>(groups_.size())),
          layout_base_(layout_base),
          run_base_(run_base),
          max_run_(max_run),
          newline_(newline),
          indent_(indent),
          dedent_(dedent),
          endmarker_(endmarker),
          max_depth_(max_depth),
          max_indent_(max_indent),
          tab_size_(tab_size) {
        if (tokens > kMaxTokens) throw std::invalid_argument("too many grammar tokens");
        if (count_ >= 4096 || run_base_ + 2 * max_run_ >= 8192) {
            throw std::invalid_argument("too many lexer events");
        }
        auto copy = [](py::array_t<int32_t>& array) {
            auto view = array.unchecked<1>();
            std::vector<int> out(view.shape(0));
            for (ssize_t i = 0; i < view.shape(0); ++i) out[i] = view(i);
            return out;
        };
        action_index_ = copy(action_index);
        action_data_ = copy(action_data);
        gotos_ = copy(gotos);
        opener_.assign(count_, 0);
        closer_.assign(count_, 0);
        for (int g : openers) opener_[g] = 1;
        for (int g : closers) closer_[g] = 1;
        group_tokens_.resize(count_);
        for (int g = 0; g < count_; ++g) {
            group_tokens_[g] = TokenSet{0, 0, 0};
            for (int t : groups_[g]) group_tokens_[g][t >> 6] |= 1ULL << (t & 63);
        }
        state_has_shift_.resize(static_cast<size_t>(states_) * tokens_, 0);
        state_tokens_.resize(states_);
        for (int s = 0; s < states_; ++s) {
            for (int t = 0; t < tokens_; ++t) {
                int offset = action_index_[static_cast<size_t>(s) * tokens_ + t];
                if (offset < 0) continue;
                if (t != end_token_) state_tokens_[s].push_back(t);
                int n = action_data_[offset];
                for (int i = 0; i < n; ++i) {
                    int act = action_data_[offset + 1 + i];
                    if (act >= 0 && act != accept_) state_has_shift_[static_cast<size_t>(s) * tokens_ + t] = 1;
                }
            }
        }
        start();
    }

    int initial() const { return initial_; }

    // Everything held: interned stacks, configurations, indentation stacks, layout states,
    // memo rows and materialised edges.
    size_t entries() const {
        size_t total = node_state_.size() + configs() + indents_.size() + layouts_.size() +
                       trees_.size();
        for (const FlatMap& memo : memos_) total += memo.size();
        return total;
    }

    // Drop every state; the initial state keeps its id. The tables stay.
    void reset() {
        std::vector<int>().swap(node_state_);
        std::vector<int>().swap(node_parent_);
        node_ids_.clear();
        std::vector<int>().swap(config_offsets_);
        std::vector<int>().swap(config_data_);
        config_index_.clear();
        std::vector<TokenSet>().swap(viable_);
        std::vector<char>().swap(viable_done_);
        for (FlatMap& memo : memos_) memo.clear();
        std::unordered_map<uint64_t, EdgeTree*>().swap(edges_);
        std::vector<std::unique_ptr<EdgeTree>>().swap(trees_);
        std::vector<Indent>().swap(indents_);
        indent_index_.clear();
        std::vector<Layout>().swap(layouts_);
        layout_index_.clear();
        start();
    }

    // -- GLR ----------------------------------------------------------------------------------

    static uint64_t node_key(int state, int parent) {
        return static_cast<uint64_t>(static_cast<uint32_t>(state)) << 32 |
               static_cast<uint32_t>(parent + 1);
    }

    int node(int state, int parent) {
        uint64_t key = node_key(state, parent);
        int found;
        if (node_ids_.find(key, found)) return found;
        int id = static_cast<int>(node_state_.size());
        node_state_.push_back(state);
        node_parent_.push_back(parent);
        node_ids_.insert(key, id);
        return id;
    }

    size_t configs() const { return config_offsets_.empty() ? 0 : config_offsets_.size() - 1; }

    int config(const std::vector<int>& stacks) {
        uint64_t hash = stacks_hash(stacks.data(), stacks.size());
        int found = config_index_.find(hash, [&](int id) {
            int begin = config_offsets_[id], end = config_offsets_[id + 1];
            return end - begin == static_cast<int>(stacks.size()) &&
                   std::equal(stacks.begin(), stacks.end(), config_data_.begin() + begin);
        });
        if (found >= 0) return found;
        int id = static_cast<int>(configs());
        config_data_.insert(config_data_.end(), stacks.begin(), stacks.end());
        config_offsets_.push_back(static_cast<int>(config_data_.size()));
        config_index_.insert(hash, id);
        viable_.push_back(TokenSet{0, 0, 0});
        viable_done_.push_back(0);
        return id;
    }

    std::vector<int> stacks_of(int cfg) const {
        return std::vector<int>(config_data_.begin() + config_offsets_[cfg],
                                config_data_.begin() + config_offsets_[cfg + 1]);
    }

    const std::vector<Outcome>& edge(int stack, int token) {
        uint64_t key = static_cast<uint64_t>(node_state_[stack]) * 256 + token;
        auto found = edges_.find(key);
        EdgeTree* tree = found == edges_.end() ? nullptr : found->second;
        int cursor = stack;
        while (tree != nullptr && !tree->leaf) {
            cursor = cursor >= 0 ? node_parent_[cursor] : cursor;
            int below = cursor >= 0 ? node_state_[cursor] : -1;
            auto next = tree->below.find(below);
            tree = next == tree->below.end() ? nullptr : next->second;
        }
        if (tree != nullptr) return tree->outcomes;
        return materialise(stack, token);
    }
    const std::vector<Outcome>& materialise(int stack, int token) {
        std::vector<int> below{node_state_[stack]};
        int cursor = stack;
        auto state_at = [&](int depth) {
            while (static_cast<int>(below.size()) <= depth) {
                cursor = cursor >= 0 ? node_parent_[cursor] : cursor;
                below.push_back(cursor >= 0 ? node_state_[cursor] : -1);
            }
            return below[depth];
        };
        int deepest = 0;
        std::vector<Outcome> outcomes;
        std::vector<std::pair<int, std::vector<int>>> agenda{{0, {}}};
        std::vector<std::pair<int, std::vector<int>>> seen{{0, {}}};
        while (!agenda.empty()) {
            auto [popped, pushed] = agenda.back();
            agenda.pop_back();
            int top = pushed.empty() ? state_at(popped) : pushed.back();
            if (top < 0) continue;
            int offset = action_index_[static_cast<size_t>(top) * tokens_ + token];
            if (offset < 0) continue;
            int n = action_data_[offset];
            for (int i = 0; i < n; ++i) {
                int act = action_data_[offset + 1 + i];
                if (act == accept_) {
                    outcomes.push_back({-1, {}});
                } else if (act >= 0) {
                    std::vector<int> pushes = pushed;
                    pushes.push_back(act);
                    outcomes.push_back({popped, pushes});
                } else {
                    int production = -act - 1;
                    int length = production_length_[production];
                    std::vector<int> new_pushed;
                    int new_popped = popped;
                    if (length <= static_cast<int>(pushed.size())) {
                        new_pushed.assign(pushed.begin(), pushed.end() - length);
                    } else {
                        new_popped = popped + length - static_cast<int>(pushed.size());
                    }
                    int exposed = new_pushed.empty() ? state_at(new_popped) : new_pushed.back();
                    if (new_pushed.empty()) deepest = std::max(deepest, new_popped);
                    if (exposed < 0) continue;
                    int target = gotos_[static_cast<size_t>(exposed) * nonterminals_ +
                                        production_lhs_[production]];
                    if (target < 0) continue;
                    new_pushed.push_back(target);
                    std::pair<int, std::vector<int>> item{new_popped, new_pushed};
                    if (std::find(seen.begin(), seen.end(), item) == seen.end()) {
                        seen.push_back(item);
                        agenda.push_back(item);
                    }
                }
            }
        }
        std::vector<Outcome> unique;
        for (auto& outcome : outcomes) {
            bool duplicate = false;
            for (auto& kept : unique) {
                if (kept.pop == outcome.pop && kept.push == outcome.push) duplicate = true;
            }
            if (!duplicate) unique.push_back(outcome);
        }
        trees_.push_back(std::make_unique<EdgeTree>());
        EdgeTree* leaf = trees_.back().get();
        leaf->leaf = true;
        leaf->outcomes = std::move(unique);
        uint64_t key = static_cast<uint64_t>(node_state_[stack]) * 256 + token;
        if (deepest == 0) {
            edges_[key] = leaf;
            return leaf->outcomes;
        }
        auto found = edges_.find(key);
        EdgeTree* tree;
        if (found == edges_.end()) {
            trees_.push_back(std::make_unique<EdgeTree>());
            tree = trees_.back().get();
            edges_[key] = tree;
        } else {
            tree = found->second;
        }
        for (int depth = 1; depth < deepest; ++depth) {
            int s = state_at(depth);
            auto next = tree->below.find(s);
            if (next == tree->below.end()) {
                trees_.push_back(std::make_unique<EdgeTree>());
                tree->below[s] = trees_.back().get();
                tree = trees_.back().get();
            } else {
                tree = next->second;
            }
        }
        tree->below[state_at(deepest)] = leaf;
        return leaf->outcomes;
    }


    void advance(int stack, int token, std::vector<int>& out, bool& accepted) {
        const std::vector<Outcome>& outcomes = edge(stack, token);
        for (const Outcome& outcome : outcomes) {
            if (outcome.pop < 0) {
                accepted = true;
                continue;
            }
            int base = stack;
            for (int i = 0; i < outcome.pop; ++i) base = node_parent_[base];
            for (int state : outcome.push) base = node(state, base);
            out.push_back(base);
        }
    }

    int parser_step(int cfg, int token) {
        uint64_t key = static_cast<uint64_t>(cfg) * 256 + token;
        int found;
        if (memos_[kSteps].find(key, found)) return found;
        std::vector<int> out;
        bool accepted = false;
        for (int stack : stacks_of(cfg)) advance(stack, token, out, accepted);
        int result = kDead;
        if (!out.empty()) {
            std::sort(out.begin(), out.end());
            out.erase(std::unique(out.begin(), out.end()), out.end());
            result = config(out);
        }
        remember(kSteps, key, result);
        return result;
    }

    int parser_step_group(int cfg, int group) {
        const std::vector<int>& tokens = groups_[group];
        if (tokens.size() == 1) return parser_step(cfg, tokens[0]);
        uint64_t key = static_cast<uint64_t>(cfg) * 4096 + group;
        int found;
        if (memos_[kGroupSteps].find(key, found)) return found;
        std::vector<int> out;
        for (int token : tokens) {
            int after = parser_step(cfg, token);
            if (after != kDead) {
                std::vector<int> stacks = stacks_of(after);
                out.insert(out.end(), stacks.begin(), stacks.end());
            }
        }
        int result = kDead;
        if (!out.empty()) {
            std::sort(out.begin(), out.end());
            out.erase(std::unique(out.begin(), out.end()), out.end());
            result = config(out);
        }
        remember(kGroupSteps, key, result);
        return result;
    }

    bool accepts_end(int cfg) {
        for (int stack : stacks_of(cfg)) {
            std::vector<int> out;
            bool accepted = false;
            advance(stack, end_token_, out, accepted);
            if (accepted) return true;
        }
        return false;
    }

    const TokenSet& viable_tokens(int cfg) {
        if (viable_done_[cfg]) return viable_[cfg];
        TokenSet result{0, 0, 0};
        for (int stack : stacks_of(cfg)) {
            int s = node_state_[stack];
            for (int token : state_tokens_[s]) {
                if (result[token >> 6] >> (token & 63) & 1ULL) continue;
                if (state_has_shift_[static_cast<size_t>(s) * tokens_ + token] ||
                    !edge(stack, token).empty()) {
                    result[token >> 6] |= 1ULL << (token & 63);
                }
            }
        }
        viable_[cfg] = result;
        viable_done_[cfg] = 1;
        return viable_[cfg];
    }

    // -- layout -------------------------------------------------------------------------------

    int indent_node(int col, int altcol, int parent) {
        uint64_t hash = indent_hash(col, altcol, parent);
        int found = indent_index_.find(hash, [&](int id) {
            const Indent& i = indents_[id];
            return i.col == col && i.altcol == altcol && i.parent == parent;
        });
        if (found >= 0) return found;
        int id = static_cast<int>(indents_.size());
        int size = parent >= 0 ? indents_[parent].size + 1 : 1;
        indents_.push_back({col, altcol, parent, size});
        indent_index_.insert(hash, id);
        return id;
    }

    int layout(const Layout& value) {
        uint64_t hash = layout_hash(value);
        int found = layout_index_.find(hash, [&](int id) { return layouts_[id] == value; });
        if (found >= 0) return found;
        int id = static_cast<int>(layouts_.size());
        layouts_.push_back(value);
        layout_index_.insert(hash, id);
        return id;
    }

    int step(int state, int event) {
        uint64_t key = static_cast<uint64_t>(state) * 8192 + event;
        int found;
        if (memos_[kLayoutSteps].find(key, found)) return found;
        int result = compute_step(state, event);
        remember(kLayoutSteps, key, result);
        return result;
    }

    int compute_step(int state, int event) {
        Layout l = layouts_[state];
        if (event >= run_base_) {
            if (!l.at_start) return state;
            int kind = (event - run_base_) / max_run_;
            int count = (event - run_base_) % max_run_;
            if (kind == 0) {
                l.col += count;
                l.altcol += count;
            } else {
                l.col = (l.col / tab_size_ + count) * tab_size_;
                l.altcol += count;
            }
            l.after_cont = 0;
            return layout(l);
        }
        if (event >= layout_base_) {
            int lexeme = event - layout_base_;  // SP TAB FF NL COMMENT CONT
            if (lexeme == 5) {
                if (l.at_start && !l.cont_col) l.cont_col = l.col;
                l.after_cont = 1;
                return layout(l);
            }
            if (!l.at_start) {
                if (lexeme == 3 && l.depth == 0) {
                    int cfg = parser_step(l.config, newline_);
                    if (cfg == kDead) return kDead;
                    return layout({0, l.indents, 1, 0, 0, 0, 0, cfg});
                }
                if (lexeme == 4 && l.depth == 0 && parser_step(l.config, newline_) == kDead) {
                    return kDead;
                }
                return layout({l.depth, l.indents, 0, 0, 0, 0, 0, l.config});
            }
            if (lexeme == 0) {
                l.col += 1;
                l.altcol += 1;
            } else if (lexeme == 1) {
                l.col = (l.col / tab_size_ + 1) * tab_size_;
                l.altcol += 1;
            } else if (lexeme == 2) {
                l.col = l.altcol = 0;
            } else if (lexeme == 3) {
                l.col = l.altcol = l.cont_col = 0;
            }
            l.after_cont = 0;
            return layout(l);
        }
        bool inner = event >= count_;
        int group = inner ? event - count_ : event;
        int cfg = l.config;
        int indents = l.indents;
        if (l.at_start) {
            int col = l.cont_col ? l.cont_col : l.col;
            int altcol = l.cont_col ? l.cont_col : l.altcol;
            if (!indentation(indents, col, altcol, cfg)) return kDead;
        }
        int depth = l.depth;
        if (!inner) {
            if (opener_[group]) {
                depth += 1;
                if (depth > max_depth_) return kDead;
            } else if (closer_[group]) {
                if (depth == 0) return kDead;
                depth -= 1;
            }
        }
        cfg = parser_step_group(cfg, group);
        if (cfg == kDead) return kDead;
        return layout({depth, indents, 0, 0, 0, 0, 0, cfg});
    }

    bool indentation(int& indents, int col, int altcol, int& cfg) {
        const Indent& top = indents_[indents];
        if (col == top.col) return altcol == top.altcol;
        if (col > top.col) {
            if (altcol <= top.altcol || top.size > max_indent_) return false;
            cfg = parser_step(cfg, indent_);
            if (cfg == kDead) return false;
            indents = indent_node(col, altcol, indents);
            return true;
        }
        while (col < indents_[indents].col) {
            indents = indents_[indents].parent;
            cfg = parser_step(cfg, dedent_);
            if (cfg == kDead) return false;
        }
        return indents_[indents].col == col && indents_[indents].altcol == altcol;
    }

    bool complete_within(int state) {
        int found;
        if (memos_[kComplete].find(static_cast<uint64_t>(state), found)) return found;
        const Layout& l = layouts_[state];
        bool result = false;
        if (!l.depth && !l.after_cont) {
            int cfg = l.config;
            int levels = indents_[l.indents].size - 1;
            if (!l.at_start) cfg = parser_step(cfg, newline_);
            for (int i = 0; i < levels && cfg != kDead; ++i) cfg = parser_step(cfg, dedent_);
            if (cfg != kDead) cfg = parser_step(cfg, endmarker_);
            result = cfg != kDead && accepts_end(cfg);
        }
        remember(kComplete, static_cast<uint64_t>(state), result);
        return result;
    }

    // Whether the input may end at `state` (the open line closed, every level dedented,
    // ENDMARKER read and the sentence complete); what it takes to find out is scratch.
    bool is_complete(int state) {
        int found;
        if (memos_[kComplete].find(static_cast<uint64_t>(state), found)) return found;
        bool result;
        {
            Scratch scratch(*this);
            result = complete_within(state);
        }
        memos_[kComplete].insert(static_cast<uint64_t>(state), result);
        return result;
    }

    // Whether `events` (the last lexeme, read at the end of the input) lead from `state` to a
    // state where the input may end; scratch throughout.
    bool completes_after(int state, const std::vector<int>& events) {
        Scratch scratch(*this);
        for (int event : events) {
            state = step(state, event);
            if (state == kDead) return false;
        }
        return complete_within(state);
    }

    int apply(int state, const std::vector<int>& events) {
        for (int event : events) {
            state = step(state, event);
            if (state == kDead) return kDead;
        }
        return state;
    }

    // -- masks --------------------------------------------------------------------------------

    int add_class(std::vector<int> single, std::vector<std::vector<int>> longer, bool empty) {
        classes_.push_back({std::move(single), std::move(longer), empty});
        return static_cast<int>(classes_.size()) - 1;
    }

    bool event_in_line(int state, int event) {
        const Layout& l = layouts_[state];
        if (event >= layout_base_) {
            int lexeme = event - layout_base_;
            if (lexeme == 3 || lexeme == 4) {
                return l.depth || (viable_tokens(l.config)[newline_ >> 6] >> (newline_ & 63) & 1ULL);
            }
            return true;
        }
        bool inner = event >= count_;
        int group = inner ? event - count_ : event;
        if (!inner && l.depth == 0 && closer_[group]) return false;
        const TokenSet& viable = viable_tokens(l.config);
        const TokenSet& tokens = group_tokens_[group];
        return (viable[0] & tokens[0]) | (viable[1] & tokens[1]) | (viable[2] & tokens[2]);
    }

    static uint64_t class_key(int state, int cls) {
        return static_cast<uint64_t>(static_cast<uint32_t>(state)) << 32 | static_cast<uint32_t>(cls);
    }

    bool class_within(int state, int cls) {
        const Reading& reading = classes_[cls];
        if (reading.empty) return true;
        uint64_t key = class_key(state, cls);
        int found;
        if (memos_[kViableClasses].find(key, found)) return found;
        bool result = false;
        bool in_line = !layouts_[state].at_start;
        for (int event : reading.single) {
            if (in_line ? event_in_line(state, event) : step(state, event) != kDead) {
                result = true;
                break;
            }
        }
        if (!result) {
            for (const auto& events : reading.longer) {
                if (apply(state, events) != kDead) {
                    result = true;
                    break;
                }
            }
        }
        remember(kViableClasses, key, result);
        return result;
    }

    // Whether a lexeme of completion class `cls` pending at `state` can still become a token
    // the parser takes; what it takes to find out is scratch.
    bool class_viable(int state, int cls) {
        if (classes_[cls].empty) return true;
        uint64_t key = class_key(state, cls);
        int found;
        if (memos_[kViableClasses].find(key, found)) return found;
        bool result;
        {
            Scratch scratch(*this);
            result = class_within(state, cls);
        }
        memos_[kViableClasses].insert(key, result);
        return result;
    }

    // A trie of token groups (nodes breadth first, root 0) with the tokens of each leaf;
    // returns its id. A leaf holding more than one token in eight is kept as packed bits.
    int add_trie(std::vector<int> child_offsets, std::vector<int> child_events,
                 std::vector<int> child_targets, std::vector<int> leaf_offsets,
                 std::vector<int> leaf_classes, std::vector<py::array_t<int32_t>> leaf_ids,
                 int width) {
        auto trie = std::make_unique<Trie>();
        trie->child_offsets = std::move(child_offsets);
        trie->child_events = std::move(child_events);
        trie->child_targets = std::move(child_targets);
        trie->leaf_offsets = std::move(leaf_offsets);
        trie->leaf_classes = std::move(leaf_classes);
        for (auto& ids : leaf_ids) {
            auto view = ids.unchecked<1>();
            Leaf leaf;
            if (view.shape(0) * 8 > width) {
                leaf.kind = 1;
                leaf.bits.assign(width, 0);
                for (ssize_t i = 0; i < view.shape(0); ++i) {
                    int token = view(i);
                    leaf.bits[token >> 3] |= static_cast<uint8_t>(1u << (token & 7));
                }
            } else {
                leaf.kind = 0;
                leaf.ids.assign(view.data(0), view.data(0) + view.shape(0));
            }
            trie->leaves.push_back(std::move(leaf));
        }
        if (!free_tries_.empty()) {
            int id = free_tries_.back();
            free_tries_.pop_back();
            tries_[id] = std::move(trie);
            return id;
        }
        tries_.push_back(std::move(trie));
        return static_cast<int>(tries_.size()) - 1;
    }

    // Free a trie's memory; its id may be given to a later trie.
    void release_trie(int id) {
        if (id < 0 || id >= static_cast<int>(tries_.size()) || !tries_[id]) {
            throw std::invalid_argument("no such trie");
        }
        tries_[id].reset();
        free_tries_.push_back(id);
    }

    void or_leaf(const Leaf& leaf, uint8_t* out) {
        if (leaf.kind == 1) {
            size_t n = leaf.bits.size();
            for (size_t i = 0; i < n; ++i) out[i] |= leaf.bits[i];
        } else {
            for (int32_t token : leaf.ids) out[token >> 3] |= static_cast<uint8_t>(1u << (token & 7));
        }
    }

    // Or into `out` the tokens of every group of the trie (`line_start` at the start of a line,
    // `in_line` inside one) that is viable from `state`; the states stepped through are scratch.
    void walk(int line_start, int in_line, int state, py::array_t<uint8_t> out) {
        int chosen = layouts_[state].at_start ? line_start : in_line;
        if (chosen < 0 || chosen >= static_cast<int>(tries_.size()) || !tries_[chosen]) {
            throw std::invalid_argument("no such trie");
        }
        const Trie& first = *tries_[chosen];
        uint8_t* bits = out.mutable_data();
        Scratch scratch(*this);
        std::vector<std::pair<int, int>> agenda{{0, state}};
        while (!agenda.empty()) {
            auto [node, current] = agenda.back();
            agenda.pop_back();
            for (int i = first.leaf_offsets[node]; i < first.leaf_offsets[node + 1]; ++i) {
                if (class_within(current, first.leaf_classes[i])) or_leaf(first.leaves[i], bits);
            }
            bool in_line_now = !layouts_[current].at_start;
            for (int i = first.child_offsets[node]; i < first.child_offsets[node + 1]; ++i) {
                int event = first.child_events[i];
                if (in_line_now && event < run_base_ && !event_in_line(current, event)) continue;
                int following = step(current, event);
                if (following != kDead) agenda.emplace_back(first.child_targets[i], following);
            }
        }
    }

    py::dict sizes() const {
        py::dict out;
        out["nodes"] = node_state_.size();
        out["configs"] = configs();
        out["layouts"] = layouts_.size();
        out["indents"] = indents_.size();
        out["edges"] = trees_.size();
        size_t memo = 0;
        for (const FlatMap& table : memos_) memo += table.size();
        out["memo"] = memo;
        out["tries"] = tries_.size() - free_tries_.size();
        size_t trie_bytes = 0;
        for (const auto& trie : tries_) {
            if (!trie) continue;
            trie_bytes += (trie->child_offsets.capacity() + trie->child_events.capacity() +
                           trie->child_targets.capacity() + trie->leaf_offsets.capacity() +
                           trie->leaf_classes.capacity()) * sizeof(int);
            for (const Leaf& leaf : trie->leaves) {
                trie_bytes += sizeof(Leaf) + leaf.ids.capacity() * sizeof(int32_t) + leaf.bits.capacity();
            }
        }
        out["trie_bytes"] = trie_bytes;
        return out;
    }

   private:
    // Everything interned or remembered while a Scratch lives is dropped when it ends.
    class Scratch {
       public:
        explicit Scratch(SyntaxCore& core) : core_(core), outer_(!core.scratch_) {
            if (outer_) core_.begin_scratch();
        }
        ~Scratch() {
            if (outer_) core_.end_scratch();
        }
        Scratch(const Scratch&) = delete;
        Scratch& operator=(const Scratch&) = delete;

       private:
        SyntaxCore& core_;
        bool outer_;
    };

    void begin_scratch() {
        mark_nodes_ = node_state_.size();
        mark_configs_ = configs();
        mark_indents_ = indents_.size();
        mark_layouts_ = layouts_.size();
        scratch_ = true;
    }

    void end_scratch() {
        for (const auto& [memo, key] : log_) memos_[memo].erase(key);
        log_.clear();
        for (size_t id = node_state_.size(); id-- > mark_nodes_;) {
            node_ids_.erase(node_key(node_state_[id], node_parent_[id]));
        }
        node_state_.resize(mark_nodes_);
        node_parent_.resize(mark_nodes_);
        for (size_t id = configs(); id-- > mark_configs_;) {
            int begin = config_offsets_[id], end = config_offsets_[id + 1];
            config_index_.erase(stacks_hash(config_data_.data() + begin, end - begin),
                                static_cast<int>(id));
        }
        config_data_.resize(config_offsets_[mark_configs_]);
        config_offsets_.resize(mark_configs_ + 1);
        viable_.resize(mark_configs_);
        viable_done_.resize(mark_configs_);
        for (size_t id = indents_.size(); id-- > mark_indents_;) {
            const Indent& i = indents_[id];
            indent_index_.erase(indent_hash(i.col, i.altcol, i.parent), static_cast<int>(id));
        }
        indents_.resize(mark_indents_);
        for (size_t id = layouts_.size(); id-- > mark_layouts_;) {
            layout_index_.erase(layout_hash(layouts_[id]), static_cast<int>(id));
        }
        layouts_.resize(mark_layouts_);
        scratch_ = false;
    }

    void remember(Memo memo, uint64_t key, int value) {
        memos_[memo].insert(key, value);
        if (scratch_) log_.emplace_back(memo, key);
    }

    // The initial stack, configuration, indentation and layout state: id 0 each.
    void start() {
        config_offsets_.assign(1, 0);
        int root = node(0, -1);
        initial_config_ = config({root});
        int indents = indent_node(0, 0, -1);
        initial_ = layout({0, indents, 1, 0, 0, 0, 0, initial_config_});
    }

    int states_, tokens_, nonterminals_;
    std::vector<int> action_index_, action_data_, gotos_;
    std::vector<int> production_lhs_, production_length_;
    int end_token_, accept_;
    std::vector<std::vector<int>> groups_;
    int count_;
    int layout_base_, run_base_, max_run_;
    int newline_, indent_, dedent_, endmarker_;
    int max_depth_, max_indent_, tab_size_;
    std::vector<char> opener_, closer_;
    std::vector<TokenSet> group_tokens_;
    std::vector<char> state_has_shift_;
    std::vector<std::vector<int>> state_tokens_;

    std::vector<int> node_state_, node_parent_;
    FlatMap node_ids_;
    std::vector<int> config_offsets_, config_data_;
    InternIndex config_index_;
    std::unordered_map<uint64_t, EdgeTree*> edges_;
    std::vector<std::unique_ptr<EdgeTree>> trees_;
    std::vector<TokenSet> viable_;
    std::vector<char> viable_done_;
    int initial_config_ = 0;

    std::vector<Indent> indents_;
    InternIndex indent_index_;
    std::vector<Layout> layouts_;
    InternIndex layout_index_;
    std::array<FlatMap, kMemos> memos_;
    int initial_ = 0;

    bool scratch_ = false;
    size_t mark_nodes_ = 0, mark_configs_ = 0, mark_indents_ = 0, mark_layouts_ = 0;
    std::vector<std::pair<Memo, uint64_t>> log_;

    std::vector<Reading> classes_;
    std::vector<std::unique_ptr<Trie>> tries_;
    std::vector<int> free_tries_;
};

}  // namespace

void bind_syntax(py::module_& m) {
    py::class_<SyntaxCore>(m, "SyntaxCore",
                           "The language grammars' hot path: GLR stacks, the Python layout layer, "
                           "viability of pending lexemes and the token-trie mask walk.")
        .def(py::init<py::array_t<int32_t>, py::array_t<int32_t>, py::array_t<int32_t>, int, int, int,
                      std::vector<int>, std::vector<int>, int, int, std::vector<std::vector<int>>,
                      std::vector<int>, std::vector<int>, int, int, int, int, int, int, int, int, int,
                      int>())
        .def_property_readonly("initial", &SyntaxCore::initial)
        .def("step", &SyntaxCore::step)
        .def("apply", &SyntaxCore::apply)
        .def("is_complete", &SyntaxCore::is_complete)
        .def("completes_after", &SyntaxCore::completes_after)
        .def("add_class", &SyntaxCore::add_class)
        .def("class_viable", &SyntaxCore::class_viable)
        .def("add_trie", &SyntaxCore::add_trie)
        .def("release_trie", &SyntaxCore::release_trie)
        .def("walk", &SyntaxCore::walk)
        .def("entries", &SyntaxCore::entries)
        .def("reset", &SyntaxCore::reset)
        .def("sizes", &SyntaxCore::sizes);
}
