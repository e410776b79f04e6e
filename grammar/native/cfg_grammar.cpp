#include "cfg_grammar.h"

#include <algorithm>
#include <utility>

#include "partition_refinement.h"

namespace cad::cfg {

namespace {

// The bytes of ``bytes`` in increasing order, into ``out``.
void members(const ByteClass& bytes, std::vector<uint8_t>& out) {
    out.clear();
    for (int word = 0; word < 4; ++word) {
        for (uint64_t bits = bytes[word]; bits != 0; bits &= bits - 1) {
            out.push_back(static_cast<uint8_t>(word * 64 + __builtin_ctzll(bits)));
        }
    }
}

}  // namespace

ByteAtoms::ByteAtoms(const std::vector<ByteClass>& terminals) {
    // Bytes share an atom exactly when every terminal holds both or neither.
    PartitionRefinement parts(256);
    parts.start();
    std::vector<uint8_t> bytes(256);
    for (int byte = 0; byte < 256; ++byte) bytes[byte] = static_cast<uint8_t>(byte);
    parts.refine(bytes);
    for (const ByteClass& terminal : terminals) {
        members(terminal, bytes);
        parts.refine(bytes);
    }
    std::array<int32_t, 256> atom_of_part;
    atom_of_part.fill(-1);
    for (int byte = 0; byte < 256; ++byte) {
        int32_t& atom = atom_of_part[parts.part(byte)];
        if (atom < 0) {
            atom = static_cast<int32_t>(first_byte.size());
            first_byte.push_back(static_cast<uint8_t>(byte));
        }
        atom_of_byte[byte] = static_cast<uint8_t>(atom);
    }
    end_atom = static_cast<int32_t>(first_byte.size());
    terminal_atoms.resize(terminals.size());
    std::vector<uint32_t> seen(static_cast<size_t>(end_atom), 0);
    uint32_t round = 0;
    for (size_t t = 0; t < terminals.size(); ++t) {
        members(terminals[t], bytes);
        ++round;
        std::vector<int32_t>& atoms = terminal_atoms[t];
        for (uint8_t byte : bytes) {
            const int32_t atom = atom_of_byte[byte];
            if (seen[atom] != round) {
                seen[atom] = round;
                atoms.push_back(atom);
            }
        }
        std::sort(atoms.begin(), atoms.end());
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
