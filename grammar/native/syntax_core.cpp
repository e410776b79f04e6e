// Native hot path of the language grammars (cad.grammar.syntax): GLR stacks over LALR(1)
// tables with prefix-conditioned edges, the Python layout layer (NEWLINE, INDENT, DEDENT),
// the viability of a lexeme in progress, and the token-trie walk that fills a packed mask.
// It mirrors grammar/syntax/glr.py, python_layout.py and python_masks.py step for step;
// those stay the reference the tests compare it with.
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

struct VectorHash {
    size_t operator()(const std::vector<int>& values) const {
        uint64_t hash = 1469598103934665603ULL ^ values.size();
        for (int value : values) {
            hash = (hash ^ static_cast<uint64_t>(static_cast<uint32_t>(value))) * 1099511628211ULL;
        }
        return static_cast<size_t>(hash);
    }
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

struct LayoutHash {
    size_t operator()(const Layout& l) const {
        uint64_t h = static_cast<uint64_t>(l.config) * 1000003ULL;
        h ^= static_cast<uint64_t>(l.indents) * 10007ULL + static_cast<uint64_t>(l.depth) * 131ULL;
        h ^= (static_cast<uint64_t>(l.col) << 20) ^ (static_cast<uint64_t>(l.altcol) << 34) ^
             (static_cast<uint64_t>(l.cont_col) << 44) ^ (static_cast<uint64_t>(l.at_start) << 60) ^
             (static_cast<uint64_t>(l.after_cont) << 61);
        return static_cast<size_t>(h * 11400714819323198485ULL);
    }
};

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
    std::vector<int> leaf_refs;
};

uint64_t pair_key(uint64_t high, uint64_t low) { return (high << 24) ^ low; }

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
        int root = node(0, -1);
        initial_config_ = config({root});
        int indents = indent_node(0, 0, -1);
        initial_ = layout({0, indents, 1, 0, 0, 0, 0, initial_config_});
    }

    int initial() const { return initial_; }

    // -- GLR ----------------------------------------------------------------------------------

    int node(int state, int parent) {
        uint64_t key = pair_key(static_cast<uint64_t>(state), static_cast<uint64_t>(parent + 1));
        auto found = node_ids_.find(key);
        if (found != node_ids_.end()) return found->second;
        int id = static_cast<int>(node_state_.size());
        node_state_.push_back(state);
        node_parent_.push_back(parent);
        node_ids_.emplace(key, id);
        return id;
    }

    int config(const std::vector<int>& stacks) {
        auto found = config_ids_.find(stacks);
        if (found != config_ids_.end()) return found->second;
        int id = static_cast<int>(configs_.size());
        configs_.push_back(stacks);
        config_ids_.emplace(stacks, id);
        viable_.push_back(TokenSet{0, 0, 0});
        viable_done_.push_back(0);
        return id;
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
        auto found = steps_.find(key);
        if (found != steps_.end()) return found->second;
        std::vector<int> out;
        bool accepted = false;
        std::vector<int> stacks = configs_[cfg];
        for (int stack : stacks) advance(stack, token, out, accepted);
        int result = kDead;
        if (!out.empty()) {
            std::sort(out.begin(), out.end());
            out.erase(std::unique(out.begin(), out.end()), out.end());
            result = config(out);
        }
        steps_.emplace(key, result);
        return result;
    }

    int parser_step_group(int cfg, int group) {
        const std::vector<int>& tokens = groups_[group];
        if (tokens.size() == 1) return parser_step(cfg, tokens[0]);
        uint64_t key = static_cast<uint64_t>(cfg) * 4096 + group;
        auto found = group_steps_.find(key);
        if (found != group_steps_.end()) return found->second;
        std::vector<int> out;
        for (int token : tokens) {
            int after = parser_step(cfg, token);
            if (after != kDead) {
                const std::vector<int>& stacks = configs_[after];
                out.insert(out.end(), stacks.begin(), stacks.end());
            }
        }
        int result = kDead;
        if (!out.empty()) {
            std::sort(out.begin(), out.end());
            out.erase(std::unique(out.begin(), out.end()), out.end());
            result = config(out);
        }
        group_steps_.emplace(key, result);
        return result;
    }

    bool accepts_end(int cfg) {
        std::vector<int> stacks = configs_[cfg];
        for (int stack : stacks) {
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
        std::vector<int> stacks = configs_[cfg];
        for (int stack : stacks) {
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
        uint64_t key = (static_cast<uint64_t>(col) << 40) ^ (static_cast<uint64_t>(altcol) << 24) ^
                       static_cast<uint64_t>(parent + 1);
        auto found = indent_ids_.find(key);
        if (found != indent_ids_.end()) return found->second;
        int id = static_cast<int>(indents_.size());
        int size = parent >= 0 ? indents_[parent].size + 1 : 1;
        indents_.push_back({col, altcol, parent, size});
        indent_ids_.emplace(key, id);
        return id;
    }

    int layout(const Layout& value) {
        auto found = layout_ids_.find(value);
        if (found != layout_ids_.end()) return found->second;
        int id = static_cast<int>(layouts_.size());
        layouts_.push_back(value);
        layout_ids_.emplace(value, id);
        return id;
    }

    int step(int state, int event) {
        uint64_t key = static_cast<uint64_t>(state) * 8192 + event;
        auto found = layout_steps_.find(key);
        if (found != layout_steps_.end()) return found->second;
        int result = compute_step(state, event);
        layout_steps_.emplace(key, result);
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

    bool is_complete(int state) {
        auto found = complete_.find(state);
        if (found != complete_.end()) return found->second;
        const Layout& l = layouts_[state];
        bool result = false;
        if (!l.depth && !l.after_cont) {
            int cfg = l.config;
            if (!l.at_start) cfg = parser_step(cfg, newline_);
            for (int i = 0; i < indents_[l.indents].size - 1 && cfg != kDead; ++i) {
                cfg = parser_step(cfg, dedent_);
            }
            if (cfg != kDead) cfg = parser_step(cfg, endmarker_);
            result = cfg != kDead && accepts_end(cfg);
        }
        complete_.emplace(state, result);
        return result;
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

    bool class_viable(int state, int cls) {
        const Reading& reading = classes_[cls];
        if (reading.empty) return true;
        uint64_t key = (static_cast<uint64_t>(state) << 20) ^ static_cast<uint64_t>(cls);
        auto found = viable_classes_.find(key);
        if (found != viable_classes_.end()) return found->second;
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
        viable_classes_.emplace(key, result);
        return result;
    }

    int add_leaf(py::array_t<int32_t> ids, int width) {
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
        leaves_.push_back(std::move(leaf));
        return static_cast<int>(leaves_.size()) - 1;
    }

    int add_trie(std::vector<int> child_offsets, std::vector<int> child_events,
                 std::vector<int> child_targets, std::vector<int> leaf_offsets,
                 std::vector<int> leaf_classes, std::vector<int> leaf_refs) {
        tries_.push_back({std::move(child_offsets), std::move(child_events), std::move(child_targets),
                          std::move(leaf_offsets), std::move(leaf_classes), std::move(leaf_refs)});
        return static_cast<int>(tries_.size()) - 1;
    }

    void or_leaf(const Leaf& leaf, uint8_t* out) {
        if (leaf.kind == 1) {
            size_t n = leaf.bits.size();
            for (size_t i = 0; i < n; ++i) out[i] |= leaf.bits[i];
        } else {
            for (int32_t token : leaf.ids) out[token >> 3] |= static_cast<uint8_t>(1u << (token & 7));
        }
    }

    void walk(int line_start, int in_line, int state, py::array_t<uint8_t> out) {
        uint8_t* bits = out.mutable_data();
        const Trie& first = tries_[layouts_[state].at_start ? line_start : in_line];
        std::vector<std::pair<int, int>> agenda{{0, state}};
        while (!agenda.empty()) {
            auto [node, current] = agenda.back();
            agenda.pop_back();
            for (int i = first.leaf_offsets[node]; i < first.leaf_offsets[node + 1]; ++i) {
                if (class_viable(current, first.leaf_classes[i])) or_leaf(leaves_[first.leaf_refs[i]], bits);
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
        out["configs"] = configs_.size();
        out["layouts"] = layouts_.size();
        out["edges"] = trees_.size();
        return out;
    }

   private:
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
    std::unordered_map<uint64_t, int> node_ids_;
    std::vector<std::vector<int>> configs_;
    std::unordered_map<std::vector<int>, int, VectorHash> config_ids_;
    std::unordered_map<uint64_t, int> steps_, group_steps_;
    std::unordered_map<uint64_t, EdgeTree*> edges_;
    std::vector<std::unique_ptr<EdgeTree>> trees_;
    std::vector<TokenSet> viable_;
    std::vector<char> viable_done_;
    int initial_config_;

    std::vector<Indent> indents_;
    std::unordered_map<uint64_t, int> indent_ids_;
    std::vector<Layout> layouts_;
    std::unordered_map<Layout, int, LayoutHash> layout_ids_;
    std::unordered_map<uint64_t, int> layout_steps_;
    std::unordered_map<int, bool> complete_;
    int initial_;

    std::vector<Reading> classes_;
    std::unordered_map<uint64_t, bool> viable_classes_;
    std::vector<Leaf> leaves_;
    std::vector<Trie> tries_;
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
        .def("add_class", &SyntaxCore::add_class)
        .def("class_viable", &SyntaxCore::class_viable)
        .def("add_leaf", &SyntaxCore::add_leaf)
        .def("add_trie", &SyntaxCore::add_trie)
        .def("walk", &SyntaxCore::walk)
        .def("sizes", &SyntaxCore::sizes);
}
