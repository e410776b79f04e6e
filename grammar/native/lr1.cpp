#include "lr1.h"

#include <algorithm>
#include <array>
#include <unordered_map>
#include <utility>

namespace cad::cfg {

namespace {

using Lookahead = std::array<uint64_t, 5>;  // atoms (at most 256) and end of input

void add(Lookahead& set, int32_t bit) { set[bit >> 6] |= uint64_t{1} << (bit & 63); }

bool merge(Lookahead& into, const Lookahead& from) {
    bool grew = false;
    for (size_t i = 0; i < into.size(); ++i) {
        const uint64_t fresh = from[i] & ~into[i];
        if (fresh) {
            into[i] |= fresh;
            grew = true;
        }
    }
    return grew;
}

template <class Visit>
void for_each_bit(const Lookahead& set, Visit visit) {
    for (size_t word = 0; word < set.size(); ++word) {
        for (uint64_t bits = set[word]; bits; bits &= bits - 1) {
            visit(static_cast<int32_t>(word * 64 + __builtin_ctzll(bits)));
        }
    }
}

using Kernel = std::vector<std::pair<int32_t, Lookahead>>;

struct KernelHash {
    size_t operator()(const Kernel& kernel) const {
        uint64_t digest = 1469598103934665603ULL;
        auto mix = [&digest](uint64_t value) { digest = (digest ^ value) * 1099511628211ULL; };
        for (const auto& [core, lookahead] : kernel) {
            mix(static_cast<uint64_t>(core));
            for (uint64_t word : lookahead) mix(word);
        }
        return static_cast<size_t>(digest);
    }
};

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

class Builder {
  public:
    Builder(const Grammar& grammar, int32_t max_states)
        : grammar_(grammar), cores_(grammar), atoms_(grammar.terminals), max_states_(max_states) {
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
        present_.assign(cores_.next_symbol.size(), false);
    }

    LrTables build() {
        Kernel start_kernel;
        Lookahead end{};
        add(end, atoms_.end_atom);
        start_kernel.emplace_back(cores_.start_core, end);
        state_of(start_kernel);

        const int32_t atom_count = atoms_.count();
        const int32_t nonterminals = cores_.nonterminal_count;
        std::vector<Kernel> shifts(atom_count);
        std::vector<Kernel> gotos(nonterminals);
        std::vector<int32_t> reduces(atom_count);
        for (size_t index = 0; index < kernels_.size(); ++index) {
            const std::vector<int32_t> items = closure(kernels_[index]);
            for (Kernel& kernel : shifts) kernel.clear();
            for (Kernel& kernel : gotos) kernel.clear();
            std::fill(reduces.begin(), reduces.end(), -1);
            for (int32_t core : items) {
                const int32_t symbol = cores_.next_symbol[core];
                const Lookahead& lookahead = lookahead_[core];
                if (symbol == kComplete) {
                    const int32_t production = cores_.production_of[core];
                    for_each_bit(lookahead, [&](int32_t atom) {
                        if (reduces[atom] >= 0 && reduces[atom] != production) {
                            throw NotLr1(conflict("reduce/reduce", atom, production));
                        }
                        reduces[atom] = production;
                    });
                } else if (symbol < 0) {
                    for (int32_t atom : atoms_.terminal_atoms[terminal_index(symbol)]) {
                        shifts[atom].emplace_back(core + 1, lookahead);
                    }
                } else {
                    gotos[symbol].emplace_back(core + 1, lookahead);
                }
            }
            std::vector<int32_t> action_row(atom_count, kActionError);
            for (int32_t atom = 0; atom < atom_count; ++atom) {
                const int32_t production = reduces[atom];
                if (production < 0) continue;
                action_row[atom] = production == cores_.augmented_production()
                                       ? kActionAccept
                                       : kReduceBase - production;
            }
            for (int32_t atom = 0; atom < atom_count; ++atom) {
                if (shifts[atom].empty()) continue;
                if (reduces[atom] >= 0) throw NotLr1(conflict("shift/reduce", atom, reduces[atom]));
                action_row[atom] = state_of(shifts[atom]);
            }
            std::vector<int32_t> goto_row(nonterminals, -1);
            for (int32_t symbol = 0; symbol < nonterminals; ++symbol) {
                if (!gotos[symbol].empty()) goto_row[symbol] = state_of(gotos[symbol]);
            }
            tables_action_.insert(tables_action_.end(), action_row.begin(), action_row.end());
            tables_goto_.insert(tables_goto_.end(), goto_row.begin(), goto_row.end());
        }
        LrTables tables{atoms_, static_cast<int32_t>(kernels_.size()), nonterminals,
                        std::move(tables_action_), std::move(tables_goto_),
                        cores_.production_lhs, cores_.production_length};
        return tables;
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

    // The closure of ``kernel``: its cores in increasing order, lookaheads in lookahead_.
    std::vector<int32_t> closure(const Kernel& kernel) {
        for (int32_t core : touched_) present_[core] = false;
        touched_.clear();
        std::vector<int32_t> agenda;
        for (const auto& [core, lookahead] : kernel) {
            present_[core] = true;
            lookahead_[core] = lookahead;
            touched_.push_back(core);
            agenda.push_back(core);
        }
        while (!agenda.empty()) {
            const int32_t core = agenda.back();
            agenda.pop_back();
            const int32_t symbol = cores_.next_symbol[core];
            if (symbol == kComplete || symbol < 0) continue;
            Lookahead mask = tail_first_[core + 1].first;
            if (tail_first_[core + 1].second) merge(mask, lookahead_[core]);
            for (int32_t child : cores_.first_cores[symbol]) {
                if (!present_[child]) {
                    present_[child] = true;
                    lookahead_[child] = Lookahead{};
                    touched_.push_back(child);
                }
                if (merge(lookahead_[child], mask)) agenda.push_back(child);
            }
        }
        std::vector<int32_t> items = touched_;
        std::sort(items.begin(), items.end());
        return items;
    }

    int32_t state_of(Kernel kernel) {
        std::sort(kernel.begin(), kernel.end(),
                  [](const auto& a, const auto& b) { return a.first < b.first; });
        auto found = state_ids_.find(kernel);
        if (found != state_ids_.end()) return found->second;
        if (static_cast<int32_t>(kernels_.size()) >= max_states_) {
            throw NotLr1("more than " + std::to_string(max_states_) + " LR(1) states");
        }
        const int32_t id = static_cast<int32_t>(kernels_.size());
        kernels_.push_back(kernel);
        state_ids_.emplace(std::move(kernel), id);
        return id;
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
    int32_t max_states_;
    std::vector<Lookahead> terminal_sets_;
    std::vector<Lookahead> first_;
    std::vector<std::pair<Lookahead, bool>> tail_first_;
    std::vector<int32_t> production_offsets_;
    std::vector<Lookahead> lookahead_;
    std::vector<bool> present_;
    std::vector<int32_t> touched_;
    std::vector<Kernel> kernels_;
    std::unordered_map<Kernel, int32_t, KernelHash> state_ids_;
    std::vector<int32_t> tables_action_;
    std::vector<int32_t> tables_goto_;
};

}  // namespace

LrTables build_lr1(const Grammar& grammar, int32_t max_states) {
    return Builder(grammar, max_states).build();
}

}  // namespace cad::cfg
