#include "cfg_grammar.h"

#include <utility>


namespace cad::cfg {

ByteAtoms::ByteAtoms(const std::vector<ByteClass>& terminals) {
    // Partition refinement: split every class of bytes by membership in each terminal.
    std::array<int32_t, 256> part{};
    int32_t parts = 1;
    std::vector<int32_t> renumber;
    for (const ByteClass& terminal : terminals) {
        renumber.assign(2 * static_cast<size_t>(parts), -1);
        int32_t split = 0;
        for (int byte = 0; byte < 256; ++byte) {
            int32_t& target = renumber[2 * part[byte] + (class_has(terminal, byte) ? 1 : 0)];
            if (target < 0) target = split++;
            part[byte] = target;
        }
        parts = split;
    }
    std::vector<int32_t> atom_of_part(parts, -1);
    for (int byte = 0; byte < 256; ++byte) {
        int32_t& atom = atom_of_part[part[byte]];
        if (atom < 0) {
            atom = static_cast<int32_t>(first_byte.size());
            first_byte.push_back(static_cast<uint8_t>(byte));
        }
        atom_of_byte[byte] = static_cast<uint8_t>(atom);
    }
    end_atom = static_cast<int32_t>(first_byte.size());
    terminal_atoms.resize(terminals.size());
    for (size_t t = 0; t < terminals.size(); ++t) {
        for (int32_t atom = 0; atom < end_atom; ++atom) {
            if (class_has(terminals[t], first_byte[atom])) terminal_atoms[t].push_back(atom);
        }
    }
}

ItemCores::ItemCores(const Grammar& grammar) {
    const int32_t augmented_start = static_cast<int32_t>(grammar.names.size());
    nonterminal_count = augmented_start + 1;
    const size_t productions = grammar.production_count() + 1;  // and S' ::= S
    production_lhs = grammar.lhs;
    production_lhs.push_back(augmented_start);
    const auto body = [&](size_t p) -> std::pair<const int32_t*, int32_t> {
        if (p < grammar.production_count()) return {grammar.rhs(p), grammar.rhs_length(p)};
        return {&grammar.start, 1};
    };
    first_core_begin.assign(static_cast<size_t>(nonterminal_count) + 1, 0);
    for (const int32_t head : production_lhs) ++first_core_begin[head + 1];
    for (int32_t n = 0; n < nonterminal_count; ++n) first_core_begin[n + 1] += first_core_begin[n];
    first_core_list.resize(productions);
    std::vector<int32_t> filled(first_core_begin.begin(), first_core_begin.end() - 1);
    production_length.reserve(productions);
    const size_t cores = grammar.symbols.size() + 2 * productions;
    next_symbol.reserve(cores);
    lhs.reserve(cores);
    production_of.reserve(cores);
    for (size_t p = 0; p < productions; ++p) {
        const auto [symbols, length] = body(p);
        const int32_t offset = static_cast<int32_t>(next_symbol.size());
        first_core_list[filled[production_lhs[p]]++] = offset;
        production_length.push_back(length);
        for (int32_t dot = 0; dot <= length; ++dot) {
            next_symbol.push_back(dot < length ? symbols[dot] : kComplete);
            lhs.push_back(production_lhs[p]);
            production_of.push_back(static_cast<int32_t>(p));
        }
        if (p + 1 == productions) start_core = offset;
    }
    accept_core = start_core + 1;
    nullable.assign(nonterminal_count, false);
    for (bool changed = true; changed;) {
        changed = false;
        for (size_t p = 0; p < productions; ++p) {
            if (nullable[production_lhs[p]]) continue;
            const auto [symbols, length] = body(p);
            bool all = true;
            for (int32_t i = 0; all && i < length; ++i) all = symbols[i] >= 0 && nullable[symbols[i]];
            if (all) nullable[production_lhs[p]] = changed = true;
        }
    }
}

}  // namespace cad::cfg
