// LALR(1) tables over byte atoms: the LR(0) automaton, then the lookaheads of its reductions
// by DeRemer and Pennello's relations (reads, includes, lookback), each solved in one
// traversal of its graph. A schema's grammar has about a third as many LALR(1) states as
// canonical LR(1) ones, and no state is processed twice.
#include <algorithm>
#include <climits>
#include <stdexcept>
#include <utility>

#include "fnv1a.h"
#include "kernel_states.h"
#include "lookahead_set.h"
#include "lr1.h"
#include "partition_refinement.h"

namespace cad::cfg {

namespace {

// A relation over n nodes as adjacency lists in one array: node x's edges lead to
// ``targets[begin[x] .. begin[x + 1])``.
struct Relation {
    std::vector<int32_t> begin;
    std::vector<int32_t> targets;

    // The relation of ``edges`` (from, to) over ``nodes`` nodes, each node's edges in order.
    static Relation of(size_t nodes, const std::vector<std::pair<int32_t, int32_t>>& edges) {
        Relation relation;
        relation.begin.assign(nodes + 1, 0);
        for (const auto& edge : edges) ++relation.begin[edge.first + 1];
        for (size_t node = 0; node < nodes; ++node) relation.begin[node + 1] += relation.begin[node];
        relation.targets.resize(edges.size());
        std::vector<int32_t> at(relation.begin.begin(), relation.begin.end() - 1);
        for (const auto& edge : edges) relation.targets[at[edge.first]++] = edge.second;
        return relation;
    }
};

// The least sets F with F(x) ⊇ sets(x) and F(x) ⊇ F(y) for every edge x -> y of
// ``relation``; the nodes of a strongly connected component share one set (DeRemer and
// Pennello's TRAVERSE, iteratively, so a long chain of edges cannot overflow the stack).
template <size_t Words>
std::vector<Lookahead<Words>> digraph(const Relation& relation, std::vector<Lookahead<Words>> sets) {
    struct Frame {
        int32_t node;
        int32_t mark;
        int32_t edge;
    };
    constexpr int32_t kDone = INT32_MAX;
    std::vector<int32_t> depth(sets.size(), 0);
    std::vector<int32_t> stack;
    std::vector<Frame> frames;
    auto enter = [&](int32_t node) {
        stack.push_back(node);
        depth[node] = static_cast<int32_t>(stack.size());
        frames.push_back({node, depth[node], relation.begin[node]});
    };
    for (size_t root = 0; root < sets.size(); ++root) {
        if (depth[root] != 0) continue;
        enter(static_cast<int32_t>(root));
        while (!frames.empty()) {
            Frame& frame = frames.back();
            const int32_t node = frame.node;
            if (frame.edge < relation.begin[node + 1]) {
                const int32_t target = relation.targets[frame.edge++];
                if (depth[target] == 0) {
                    enter(target);
                    continue;
                }
                depth[node] = std::min(depth[node], depth[target]);
                merge(sets[node], sets[target]);
                continue;
            }
            const int32_t mark = frame.mark;
            frames.pop_back();
            if (depth[node] == mark) {
                for (int32_t top = -1; top != node;) {
                    top = stack.back();
                    stack.pop_back();
                    depth[top] = kDone;
                    sets[top] = sets[node];
                }
            }
            if (!frames.empty()) {
                const int32_t parent = frames.back().node;
                depth[parent] = std::min(depth[parent], depth[node]);
                merge(sets[parent], sets[node]);
            }
        }
    }
    return sets;
}

template <size_t Words>
class LalrBuilder {
    using Set = Lookahead<Words>;

  public:
    LalrBuilder(const Grammar& grammar, const ByteAtoms& atoms, int32_t max_states)
        : cores_(grammar), atoms_(atoms), states_(max_states) {}

    std::optional<LrTables> build() {
        build_lr0();
        write_tables();
        if (!add_reductions()) return std::nullopt;
        return LrTables{atoms_,
                        states(),
                        cores_.nonterminal_count,
                        std::move(action_),
                        std::move(goto_row_of_),
                        std::move(goto_rows_),
                        cores_.production_lhs,
                        cores_.production_length};
    }

  private:
    struct Transition {
        int32_t state;
        int32_t symbol;  // an atom (shifts_) or a nonterminal (transitions_)
        int32_t target;
    };
    struct Reduce {
        int32_t state;
        int32_t production;
        int32_t next;  // the state's next reduction, -1 after its last
        Set lookahead;
    };
    struct Lookback {
        int32_t state;
        int32_t production;
        int32_t transition;  // whose follow set is the reduction's lookahead
    };

    int32_t states() const { return states_.count(); }

    // The LR(0) automaton: per state its shifts (by atom) and gotos (by nonterminal), in
    // order. States are numbered in the order they are first reached, atoms before
    // nonterminals, each in increasing order, as canonical LR(1) does.
    void build_lr0() {
        present_.assign(cores_.next_symbol.size(), 0);
        expanded_.assign(static_cast<size_t>(cores_.nonterminal_count), 0);
        const size_t atom_count = static_cast<size_t>(atoms_.count());
        terminal_bits_.assign(atoms_.terminal_atoms.size(), Set{});
        for (size_t t = 0; t < atoms_.terminal_atoms.size(); ++t) {
            for (int32_t atom : atoms_.terminal_atoms[t]) add(terminal_bits_[t], atom);
        }
        shift_parts_ = PartitionRefinement(atom_count);
        part_target_.assign(atom_count, -1);
        terminal_round_.assign(atoms_.terminal_atoms.size(), 0);
        std::vector<std::vector<int32_t>> gotos(cores_.nonterminal_count);
        std::vector<int32_t> kernel;
        std::vector<int32_t> moved;
        std::vector<int32_t> start{cores_.start_core};
        state_of(start);
        for (int32_t state = 0; state < states(); ++state) {
            closure(state);
            for (int32_t symbol : moved) gotos[symbol].clear();
            moved.clear();
            terminal_cores_.clear();
            for (int32_t core : touched_) {
                const int32_t symbol = cores_.next_symbol[core];
                if (symbol == kComplete) continue;
                if (symbol < 0) {
                    terminal_cores_.push_back(core);
                } else {
                    if (gotos[symbol].empty()) moved.push_back(symbol);
                    gotos[symbol].push_back(core + 1);
                }
            }
            part_atoms();
            std::sort(moved.begin(), moved.end());
            shift_begin_.push_back(static_cast<int32_t>(shifts_.size()));
            const int32_t shiftable = terminal_cores_.empty() ? 0 : atoms_.count();
            for (int32_t atom = 0; atom < shiftable; ++atom) {
                if (!shift_parts_.met(static_cast<size_t>(atom))) continue;
                const int32_t part = shift_parts_.part(atom);
                if (part_target_[part] < 0) {
                    kernel.clear();
                    for (int32_t core : terminal_cores_) {
                        if (has(terminal_bits_[terminal_index(cores_.next_symbol[core])], atom)) {
                            kernel.push_back(core + 1);
                        }
                    }
                    part_target_[part] = state_of(kernel);
                }
                shifts_.push_back({state, atom, part_target_[part]});
            }
            transition_begin_.push_back(static_cast<int32_t>(transitions_.size()));
            for (int32_t symbol : moved) {
                transitions_.push_back({state, symbol, state_of(gotos[symbol])});
            }
        }
        shift_begin_.push_back(static_cast<int32_t>(shifts_.size()));
        transition_begin_.push_back(static_cast<int32_t>(transitions_.size()));
    }

    // The atoms the closure's terminal cores shift (those ``shift_parts_`` has met), parted
    // by the terminals that hold them: the atoms of a part lead to one kernel, so it is built
    // and looked up once per part instead of once per atom (a string's character class is
    // dozens of atoms). Every part's ``part_target_`` is reset to -1.
    void part_atoms() {
        ++round_;
        shift_parts_.start();
        for (int32_t core : terminal_cores_) {
            const int32_t terminal = terminal_index(cores_.next_symbol[core]);
            if (terminal_round_[terminal] == round_) continue;
            terminal_round_[terminal] = round_;
            shift_parts_.refine(atoms_.terminal_atoms[terminal]);
        }
        std::fill(part_target_.begin(), part_target_.begin() + shift_parts_.parts(), -1);
    }

    // ACTION with the shifts, GOTO, each allocated once at its final size. States without
    // gotos share row 0 of GOTO, which has none.
    void write_tables() {
        const size_t atom_count = static_cast<size_t>(atoms_.count());
        const size_t nonterminals = static_cast<size_t>(cores_.nonterminal_count);
        action_.assign(static_cast<size_t>(states()) * atom_count, kActionError);
        for (const Transition& shift : shifts_) {
            action_[static_cast<size_t>(shift.state) * atom_count + shift.symbol] = shift.target;
        }
        goto_row_of_.assign(static_cast<size_t>(states()), 0);
        int32_t rows = 1;
        for (int32_t state = 0; state < states(); ++state) {
            if (transition_begin_[state] < transition_begin_[state + 1]) goto_row_of_[state] = rows++;
        }
        goto_rows_.assign(static_cast<size_t>(rows) * nonterminals, -1);
        for (const Transition& t : transitions_) {
            goto_rows_[static_cast<size_t>(goto_row_of_[t.state]) * nonterminals + t.symbol] = t.target;
        }
    }

    // The cores of state ``state``'s LR(0) closure in ``touched_`` (in no particular order).
    void closure(int32_t state) {
        for (int32_t core : touched_) present_[core] = 0;
        for (int32_t symbol : expanded_list_) expanded_[symbol] = 0;
        touched_.clear();
        expanded_list_.clear();
        agenda_.clear();
        for (const int32_t* item = states_.begin(state); item != states_.end(state); ++item) {
            const int32_t core = *item;
            present_[core] = 1;
            touched_.push_back(core);
            agenda_.push_back(core);
        }
        while (!agenda_.empty()) {
            const int32_t symbol = cores_.next_symbol[agenda_.back()];
            agenda_.pop_back();
            if (symbol == kComplete || symbol < 0 || expanded_[symbol]) continue;
            expanded_[symbol] = 1;
            expanded_list_.push_back(symbol);
            for (int32_t child : cores_.first_cores(symbol)) {
                if (present_[child]) continue;
                present_[child] = 1;
                touched_.push_back(child);
                agenda_.push_back(child);
            }
        }
    }

    // The LR(0) state of ``kernel`` (sorted in place), a new one if no state has it.
    int32_t state_of(std::vector<int32_t>& kernel) {
        std::sort(kernel.begin(), kernel.end());
        uint64_t digest = fnv1a::kOffsetBasis;
        for (int32_t core : kernel) digest = fnv1a::symbol(digest, static_cast<uint64_t>(core));
        return states_.state_of(kernel, static_cast<size_t>(digest ^ (digest >> 29)));
    }

    // The goto transition of ``state`` on nonterminal ``symbol`` (its index in transitions_).
    int32_t transition(int32_t state, int32_t symbol) const {
        const auto first = transitions_.begin() + transition_begin_[state];
        const auto last = transitions_.begin() + transition_begin_[state + 1];
        const auto found = std::lower_bound(
            first, last, symbol, [](const Transition& t, int32_t s) { return t.symbol < s; });
        if (found == last || found->symbol != symbol) {
            throw std::logic_error("LALR(1): a path leaves the LR(0) automaton");
        }
        return static_cast<int32_t>(found - transitions_.begin());
    }

    // Each reduction's lookaheads (the follow sets of its lookback transitions) written into
    // ACTION beside the shifts, and the accept action; false at the first conflict.
    bool add_reductions() {
        std::vector<std::pair<int32_t, int32_t>> includes;
        std::vector<Lookback> lookbacks;
        walk_productions(includes, lookbacks);
        const std::vector<Set> follow =
            digraph(Relation::of(transitions_.size(), includes), read_sets());
        return write_reductions(follow, lookbacks);
    }

    // Read(p, A): the atoms the target r of (p, A) shifts (end of input after the start
    // symbol), and Read(r, C) for every nullable C that r moves over.
    std::vector<Set> read_sets() const {
        const size_t count = transitions_.size();
        const int32_t start_symbol = cores_.next_symbol[cores_.start_core];
        std::vector<Set> direct(count);
        Relation reads;
        reads.begin.reserve(count + 1);
        for (size_t i = 0; i < count; ++i) {
            const Transition& t = transitions_[i];
            reads.begin.push_back(static_cast<int32_t>(reads.targets.size()));
            for (int32_t k = shift_begin_[t.target]; k < shift_begin_[t.target + 1]; ++k) {
                add(direct[i], shifts_[k].symbol);
            }
            if (t.state == 0 && t.symbol == start_symbol) add(direct[i], atoms_.end_atom);
            for (int32_t j = transition_begin_[t.target]; j < transition_begin_[t.target + 1]; ++j) {
                if (cores_.nullable[transitions_[j].symbol]) reads.targets.push_back(j);
            }
        }
        reads.begin.push_back(static_cast<int32_t>(reads.targets.size()));
        return digraph(reads, std::move(direct));
    }

    // Every production A ::= w walked from every goto transition (p, A): (p', B) includes
    // (p, A) when w = x B y with y nullable and p' is where x leads from p, and the reduction
    // of A ::= w at the state w leads to looks back to (p, A). A terminal is a class of atoms
    // whose shifts may part ways, so x leads to a set of states.
    void walk_productions(std::vector<std::pair<int32_t, int32_t>>& includes,
                          std::vector<Lookback>& lookbacks) const {
        const size_t atom_count = static_cast<size_t>(atoms_.count());
        std::vector<uint8_t> tail_nullable(cores_.next_symbol.size(), 0);
        for (size_t core = cores_.next_symbol.size(); core-- > 0;) {
            const int32_t symbol = cores_.next_symbol[core];
            tail_nullable[core] = symbol == kComplete ||
                                  (symbol >= 0 && cores_.nullable[symbol] && tail_nullable[core + 1]);
        }
        std::vector<int32_t> current;
        std::vector<int32_t> next;
        std::vector<uint32_t> reached(static_cast<size_t>(states()), 0);
        uint32_t epoch = 0;
        auto reach = [&](int32_t state) {
            if (state < 0) throw std::logic_error("LALR(1): a path leaves the LR(0) automaton");
            if (reached[state] != epoch) {
                reached[state] = epoch;
                next.push_back(state);
            }
        };
        for (size_t i = 0; i < transitions_.size(); ++i) {
            for (int32_t first : cores_.first_cores(transitions_[i].symbol)) {
                current.assign(1, transitions_[i].state);
                for (int32_t core = first; cores_.next_symbol[core] != kComplete; ++core) {
                    const int32_t symbol = cores_.next_symbol[core];
                    next.clear();
                    ++epoch;
                    for (int32_t state : current) {
                        if (symbol >= 0) {
                            const int32_t j = transition(state, symbol);
                            if (tail_nullable[core + 1]) includes.emplace_back(j, static_cast<int32_t>(i));
                            reach(transitions_[j].target);
                        } else {
                            const size_t row = static_cast<size_t>(state) * atom_count;
                            for (int32_t atom : atoms_.terminal_atoms[terminal_index(symbol)]) {
                                reach(action_[row + atom]);
                            }
                        }
                    }
                    current.swap(next);
                }
                for (int32_t state : current) {
                    lookbacks.push_back({state, cores_.production_of[first], static_cast<int32_t>(i)});
                }
            }
        }
    }

    // A state's reductions, each with the union of its lookbacks' follow sets, in a list per
    // state (``first_reduce``, then ``Reduce::next``): a conflict is a set that meets the
    // state's shifts or another reduction's set, found a word at a time. Written into ACTION
    // with the accept action unless there is one; false if there is.
    bool write_reductions(const std::vector<Set>& follow, const std::vector<Lookback>& lookbacks) {
        std::vector<int32_t> first_reduce(static_cast<size_t>(states()), -1);
        std::vector<Reduce> reduces;
        for (const Lookback& lookback : lookbacks) {
            int32_t* link = &first_reduce[lookback.state];
            while (*link >= 0 && reduces[*link].production != lookback.production) {
                link = &reduces[*link].next;
            }
            if (*link < 0) {
                *link = static_cast<int32_t>(reduces.size());
                reduces.push_back({lookback.state, lookback.production, -1, Set{}});
            }
            merge(reduces[*link].lookahead, follow[lookback.transition]);
        }
        const int32_t accepting =
            transitions_[transition(0, cores_.next_symbol[cores_.start_core])].target;
        Set taken{};
        for (int32_t state = 0; state < states(); ++state) {
            if (first_reduce[state] < 0) continue;
            taken = Set{};
            for (int32_t k = shift_begin_[state]; k < shift_begin_[state + 1]; ++k) {
                add(taken, shifts_[k].symbol);
            }
            if (state == accepting) add(taken, atoms_.end_atom);
            for (int32_t r = first_reduce[state]; r >= 0; r = reduces[r].next) {
                if (meet(reduces[r].lookahead, taken)) return false;
                merge(taken, reduces[r].lookahead);
            }
        }
        const size_t atom_count = static_cast<size_t>(atoms_.count());
        action_[static_cast<size_t>(accepting) * atom_count + atoms_.end_atom] = kActionAccept;
        for (const Reduce& reduce : reduces) {
            const size_t row = static_cast<size_t>(reduce.state) * atom_count;
            for_each_bit(reduce.lookahead, [&](int32_t atom) {
                action_[row + atom] = kReduceBase - reduce.production;
            });
        }
        return true;
    }

    ItemCores cores_;
    const ByteAtoms& atoms_;
    std::vector<uint8_t> present_;   // per core: in the closure being built
    std::vector<uint8_t> expanded_;  // per nonterminal: its productions added to the closure
    std::vector<int32_t> expanded_list_;
    std::vector<int32_t> touched_;
    std::vector<int32_t> agenda_;
    KernelStates<int32_t> states_;  // by their LR(0) kernels
    std::vector<Transition> shifts_;       // by state, then atom
    std::vector<int32_t> shift_begin_;     // per state, its first shift
    std::vector<Transition> transitions_;  // gotos, by state, then nonterminal
    std::vector<int32_t> transition_begin_;
    // Scratch of part_atoms, per state: the closure's cores before a terminal, and the parts
    // of the atoms they shift.
    std::vector<int32_t> terminal_cores_;
    std::vector<Set> terminal_bits_;  // per terminal, its atoms
    PartitionRefinement shift_parts_;
    std::vector<int32_t> part_target_;
    std::vector<uint32_t> terminal_round_;  // the terminals part_atoms met, this state's at round_
    uint32_t round_ = 0;
    std::vector<int32_t> action_;
    std::vector<int32_t> goto_row_of_;
    std::vector<int32_t> goto_rows_;
};

}  // namespace

std::optional<LrTables> build_lalr1(const Grammar& grammar, const ByteAtoms& atoms,
                                    int32_t max_states) {
    switch ((atoms.count() + 63) / 64) {
        case 1: return LalrBuilder<1>(grammar, atoms, max_states).build();
        case 2: return LalrBuilder<2>(grammar, atoms, max_states).build();
        case 3: return LalrBuilder<3>(grammar, atoms, max_states).build();
        case 4: return LalrBuilder<4>(grammar, atoms, max_states).build();
        default: return LalrBuilder<5>(grammar, atoms, max_states).build();
    }
}

}  // namespace cad::cfg
