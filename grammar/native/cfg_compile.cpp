// Engine choice: the DPDA when the grammar is LR(1), Earley otherwise.
#include "cfg_matcher.h"
#include "lr1.h"
#include "token_trie.h"

namespace cad::cfg {

CompileResult compile_cfg(const Grammar& grammar, std::shared_ptr<const TokenTrie> trie,
                          EngineChoice choice) {
    trie->string_slice();  // built once per vocabulary, before any mask needs it
    CompileResult result;
    if (choice != EngineChoice::Earley) {
        try {
            LrTables tables = build_lr1(grammar);
            result.lr_states = tables.states;
            result.compiled = make_dpda(std::move(tables), std::move(trie));
            return result;
        } catch (const NotLr1& error) {
            if (choice == EngineChoice::Dpda) throw;
            result.lr_note = error.what();
        }
    }
    result.compiled = make_earley(grammar, std::move(trie));
    return result;
}

}  // namespace cad::cfg
