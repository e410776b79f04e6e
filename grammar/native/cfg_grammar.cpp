#include "cfg_grammar.h"


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
    std::vector<std::vector<int32_t>> bodies = grammar.rhs;
    production_lhs = grammar.lhs;
    bodies.push_back({grammar.start});
    production_lhs.push_back(augmented_start);
    first_cores.resize(nonterminal_count);
    for (size_t p = 0; p < bodies.size(); ++p) {
        const int32_t offset = static_cast<int32_t>(next_symbol.size());
        first_cores[production_lhs[p]].push_back(offset);
        production_length.push_back(static_cast<int32_t>(bodies[p].size()));
        for (size_t dot = 0; dot <= bodies[p].size(); ++dot) {
            next_symbol.push_back(dot < bodies[p].size() ? bodies[p][dot] : kComplete);
            lhs.push_back(production_lhs[p]);
            production_of.push_back(static_cast<int32_t>(p));
        }
        if (p + 1 == bodies.size()) start_core = offset;
    }
    accept_core = start_core + 1;
    nullable.assign(nonterminal_count, false);
    for (bool changed = true; changed;) {
        changed = false;
        for (size_t p = 0; p < bodies.size(); ++p) {
            if (nullable[production_lhs[p]]) continue;
            bool all = true;
            for (int32_t symbol : bodies[p]) all = all && symbol >= 0 && nullable[symbol];
            if (all) nullable[production_lhs[p]] = changed = true;
        }
    }
}

}  // namespace cad::cfg
