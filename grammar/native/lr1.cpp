#include "lr1.h"

#include <algorithm>
#include <array>
#include <utility>

#include "fnv1a.h"
#include "kernel_states.h"
#include "lookahead_set.h"

namespace cad::cfg {

namespace {

std::string python_repr(const std::string& text) {
    const bool single = text.find('\'') == std::string::npos || text.find('"') != std::string::npos;
    const char quote = single ? '\'' : '"';
    std::string out(1, quote);
    for (char c : text) {
        if (c == quote || c == '\\') out.push_back('\\');
        out.push_back(c);
    }
    out.push_back(quote);
    return out;
}

std::string byte_repr(uint8_t byte) {
    static const char* hex = "0123456789abcdef";
    if (byte == '\'') return "b\"'\"";
    std::string inner;
    switch (byte) {
        case '\\': inner = "\\\\"; break;
        case '\t': inner = "\\t"; break;
        case '\n': inner = "\\n"; break;
        case '\r': inner = "\\r"; break;
        default:
            if (byte >= 0x20 && byte < 0x7f) {
                inner = std::string(1, static_cast<char>(byte));
            } else {
                inner = std::string("\\x") + hex[byte >> 4] + hex[byte & 15];
            }
    }
    return "b'" + inner + "'";
}

template <size_t Words>
class Builder {
    using Lookahead = cfg::Lookahead<Words>;
    using Kernel = std::vector<std::pair<int32_t, Lookahead>>;

  public:
    Builder(const Grammar& grammar, ByteAtoms atoms, int32_t max_states)
        : grammar_(grammar), cores_(grammar), atoms_(std::move(atoms)), states_(max_states) {
        terminal_sets_.resize(grammar.terminals.size());
        for (size_t t = 0; t < grammar.terminals.size(); ++t) {
            for (int32_t atom : atoms_.terminal_atoms[t]) add(terminal_sets_[t], atom);
        }
        compute_first_sets();
        tail_first_.resize(cores_.next_symbol.size());
        for (size_t core = 0; core < cores_.next_symbol.size(); ++core) {
            tail_first_[core] = compute_tail_first(static_cast<int32_t>(core));
        }
        lookahead_.resize(cores_.next_symbol.size());
        present_.assign(cores_.next_symbol.size(), 0);
    }

    LrTables build() {
        Kernel start_kernel;
        Lookahead end{};
        add(end, atoms_.end_atom);
        start_kernel.emplace_back(cores_.start_core, end);
        state_of(start_kernel);

        const int32_t atom_count = atoms_.count();
        const int32_t nonterminals = cores_.nonterminal_count;
        goto_rows_.assign(static_cast<size_t>(nonterminals), -1);  // row 0: no gotos
        std::vector<Kernel> shifts(atom_count);
        std::vector<Kernel> gotos(nonterminals);
        std::vector<int32_t> shifted;  // atoms and nonterminals whose kernel is not empty
        std::vector<int32_t> moved;
        std::vector<int32_t> reduces(atom_count, -1);
        std::vector<int32_t> reduced;  // the atoms with a reduce in this state
        for (int32_t index = 0; index < states_.count(); ++index) {
            const std::vector<int32_t>& items = closure(index);
            for (int32_t atom : shifted) shifts[atom].clear();
            for (int32_t symbol : moved) gotos[symbol].clear();
            for (int32_t atom : reduced) reduces[atom] = -1;
            shifted.clear();
            moved.clear();
            reduced.clear();
            for (int32_t core : items) {
                const int32_t symbol = cores_.next_symbol[core];
                const Lookahead& lookahead = lookahead_[core];
                if (symbol == kComplete) {
                    const int32_t production = cores_.production_of[core];
                    for_each_bit(lookahead, [&](int32_t atom) {
                        if (reduces[atom] >= 0 && reduces[atom] != production) {
                            throw NotLr1(conflict("reduce/reduce", atom, production));
                        }
                        if (reduces[atom] < 0) reduced.push_back(atom);
                        reduces[atom] = production;
                    });
                } else if (symbol < 0) {
                    for (int32_t atom : atoms_.terminal_atoms[terminal_index(symbol)]) {
                        if (shifts[atom].empty()) shifted.push_back(atom);
                        shifts[atom].emplace_back(core + 1, lookahead);
                    }
                } else {
                    if (gotos[symbol].empty()) moved.push_back(symbol);
                    gotos[symbol].emplace_back(core + 1, lookahead);
                }
            }
            // States are numbered in the order they are first reached: atoms, then
            // nonterminals, each in increasing order. Rows are written in place: the tables
            // grow with the states, so a row is addressed by offset, not by pointer.
            std::sort(shifted.begin(), shifted.end());
            std::sort(moved.begin(), moved.end());
            const size_t action_row = action_.size();
            action_.resize(action_row + static_cast<size_t>(atom_count), kActionError);
            for (int32_t atom : reduced) {
                const int32_t production = reduces[atom];
                action_[action_row + atom] = production == cores_.augmented_production()
                                                 ? kActionAccept
                                                 : kReduceBase - production;
            }
            for (int32_t atom : shifted) {
                if (reduces[atom] >= 0) throw NotLr1(conflict("shift/reduce", atom, reduces[atom]));
                const int32_t target = state_of(shifts[atom]);
                action_[action_row + atom] = target;
            }
            // Few states have gotos (those a reduction can expose: about one in thirty in a
            // schema's grammar), so each has a row of its own and the rest share row 0.
            if (moved.empty()) {
                goto_row_of_.push_back(0);
                continue;
            }
            const size_t goto_row = goto_rows_.size();
            goto_row_of_.push_back(static_cast<int32_t>(goto_row / static_cast<size_t>(nonterminals)));
            goto_rows_.resize(goto_row + static_cast<size_t>(nonterminals), -1);
            for (int32_t symbol : moved) {
                const int32_t target = state_of(gotos[symbol]);
                goto_rows_[goto_row + symbol] = target;
            }
        }
        return LrTables{atoms_,
                        states_.count(),
                        nonterminals,
                        std::move(action_),
                        std::move(goto_row_of_),
                        std::move(goto_rows_),
                        cores_.production_lhs,
                        cores_.production_length};
    }

  private:
    void compute_first_sets() {
        first_.assign(cores_.nonterminal_count, Lookahead{});
        for (bool changed = true; changed;) {
            changed = false;
            for (size_t p = 0; p < cores_.production_lhs.size(); ++p) {
                Lookahead mask{};
                const int32_t begin = first_core_of_production(p);
                for (int32_t core = begin; cores_.next_symbol[core] != kComplete; ++core) {
                    const int32_t symbol = cores_.next_symbol[core];
                    if (symbol < 0) {
                        merge(mask, terminal_sets_[terminal_index(symbol)]);
                        break;
                    }
                    merge(mask, first_[symbol]);
                    if (!cores_.nullable[symbol]) break;
                }
                if (merge(first_[cores_.production_lhs[p]], mask)) changed = true;
            }
        }
    }

    int32_t first_core_of_production(size_t production) {
        if (production_offsets_.empty()) {
            int32_t offset = 0;
            for (int32_t length : cores_.production_length) {
                production_offsets_.push_back(offset);
                offset += length + 1;
            }
        }
        return production_offsets_[production];
    }

    std::pair<Lookahead, bool> compute_tail_first(int32_t core) const {
        Lookahead mask{};
        for (int32_t position = core; cores_.next_symbol[position] != kComplete; ++position) {
            const int32_t symbol = cores_.next_symbol[position];
            if (symbol < 0) {
                merge(mask, terminal_sets_[terminal_index(symbol)]);
                return {mask, false};
            }
            merge(mask, first_[symbol]);
            if (!cores_.nullable[symbol]) return {mask, false};
        }
        return {mask, true};
    }

    // The closure of state ``state``'s kernel: its cores in increasing order, lookaheads in
    // lookahead_ (both valid until the next call, which resets the flags of these cores).
    const std::vector<int32_t>& closure(int32_t state) {
        for (int32_t core : touched_) present_[core] = 0;
        touched_.clear();
        agenda_.clear();
        for (auto item = states_.begin(state); item != states_.end(state); ++item) {
            const auto& [core, lookahead] = *item;
            present_[core] = 1;
            lookahead_[core] = lookahead;
            touched_.push_back(core);
            agenda_.push_back(core);
        }
        while (!agenda_.empty()) {
            const int32_t core = agenda_.back();
            agenda_.pop_back();
            const int32_t symbol = cores_.next_symbol[core];
            if (symbol == kComplete || symbol < 0) continue;
            Lookahead mask = tail_first_[core + 1].first;
            if (tail_first_[core + 1].second) merge(mask, lookahead_[core]);
            for (int32_t child : cores_.first_cores(symbol)) {
                if (!present_[child]) {
                    present_[child] = 1;
                    lookahead_[child] = Lookahead{};
                    touched_.push_back(child);
                }
                if (merge(lookahead_[child], mask)) agenda_.push_back(child);
            }
        }
        std::sort(touched_.begin(), touched_.end());
        return touched_;
    }

    // The state of ``kernel`` (sorted in place), a new one if no state has that kernel.
    int32_t state_of(Kernel& kernel) {
        std::sort(kernel.begin(), kernel.end(),
                  [](const auto& a, const auto& b) { return a.first < b.first; });
        return states_.state_of(kernel, hash_kernel(kernel.data(), kernel.size()));
    }

    static size_t hash_kernel(const std::pair<int32_t, Lookahead>* items, size_t count) {
        uint64_t digest = fnv1a::kOffsetBasis;
        auto mix = [&digest](uint64_t value) { digest = fnv1a::symbol(digest, value); };
        for (size_t i = 0; i < count; ++i) {
            mix(static_cast<uint64_t>(items[i].first));
            for (uint64_t word : items[i].second) mix(word);
        }
        return static_cast<size_t>(digest ^ (digest >> 29));
    }

    std::string conflict(const std::string& kind, int32_t atom, int32_t production) const {
        const std::string where =
            atom == atoms_.end_atom ? "end of input" : "byte " + byte_repr(atoms_.first_byte[atom]);
        const int32_t head = cores_.production_lhs[production];
        const std::string name =
            head < static_cast<int32_t>(grammar_.names.size()) ? grammar_.names[head] : "start";
        return kind + " conflict on " + where + " reducing a " + python_repr(name) + " production";
    }

    const Grammar& grammar_;
    ItemCores cores_;
    ByteAtoms atoms_;
    std::vector<Lookahead> terminal_sets_;
    std::vector<Lookahead> first_;
    std::vector<std::pair<Lookahead, bool>> tail_first_;
    std::vector<int32_t> production_offsets_;
    std::vector<Lookahead> lookahead_;
    std::vector<uint8_t> present_;  // bytes, not bits: read and written for every closure item
    std::vector<int32_t> touched_;
    std::vector<int32_t> agenda_;
    KernelStates<std::pair<int32_t, Lookahead>> states_;
    std::vector<int32_t> action_;
    std::vector<int32_t> goto_row_of_;
    std::vector<int32_t> goto_rows_;
};

}  // namespace

LrTables build_lr1(const Grammar& grammar, int32_t max_states) {
    ByteAtoms atoms(grammar.terminals);
    if (std::optional<LrTables> tables = build_lalr1(grammar, atoms, max_states)) {
        return std::move(*tables);
    }
    switch ((atoms.count() + 63) / 64) {
        case 1: return Builder<1>(grammar, std::move(atoms), max_states).build();
        case 2: return Builder<2>(grammar, std::move(atoms), max_states).build();
        case 3: return Builder<3>(grammar, std::move(atoms), max_states).build();
        case 4: return Builder<4>(grammar, std::move(atoms), max_states).build();
        default: return Builder<5>(grammar, std::move(atoms), max_states).build();
    }
}

}  // namespace cad::cfg
