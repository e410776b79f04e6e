// Bindings of the token table and the token trie.
#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <vector>

#include "bind_rows.h"
#include "token_trie.h"
#include "trie_walk.h"

namespace py = pybind11;

namespace cad {

void bind_vocabulary(py::module_& m) {
    py::class_<TokenTable, std::shared_ptr<TokenTable>>(
        m, "TokenTable", "Every token's bytes in one buffer (built once per vocabulary).")
        .def(py::init([](py::bytes data, py::bytes offsets, int32_t eos) {
                 const std::string packed = offsets;
                 if (packed.size() % sizeof(uint32_t)) {
                     throw std::invalid_argument("token offsets must be packed uint32 values");
                 }
                 std::vector<uint32_t> values(packed.size() / sizeof(uint32_t));
                 std::memcpy(values.data(), packed.data(), packed.size());
                 return std::make_shared<TokenTable>(std::string(data), std::move(values), eos);
             }),
             py::arg("data"), py::arg("offsets"), py::arg("eos"))
        .def_property_readonly("vocab_size", &TokenTable::vocab_size)
        .def_property_readonly("eos", &TokenTable::eos)
        .def_property_readonly("longest_token", &TokenTable::longest_token)
        .def_property_readonly("fingerprint", &TokenTable::fingerprint);

    py::class_<TokenTrie, std::shared_ptr<TokenTrie>>(
        m, "TokenTrie", "The vocabulary as a prefix tree in depth-first order.")
        .def(py::init([](std::shared_ptr<const TokenTable> table) {
                 py::gil_scoped_release release;
                 return std::make_shared<TokenTrie>(std::move(table));
             }),
             py::arg("table"))
        .def_property_readonly("node_count", &TokenTrie::node_count)
        .def_property_readonly("vocab_size", &TokenTrie::vocab_size);

    m.def(
        "trie_nodes_stepped", [] { return trie_nodes_stepped; },
        "Trie nodes the calling thread's mask walks have stepped so far (a debug measure of a "
        "mask's work: take the difference around a fill; the precompute worker's own walks are "
        "not counted, being on its thread).");
}

}  // namespace cad
