// Bindings every native matcher shares: filling one bitmask row, or many rows on threads.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <vector>

#include "bind_rows.h"
#include "parallel.h"

namespace py = pybind11;

namespace cad {

void bind_batch(py::module_& m) {
    py::class_<NativeMatcher>(m, "NativeMatcher", "Base of every native matcher.")
        .def_property_readonly("vocab_size", &NativeMatcher::vocab_size)
        .def(
            "fill_row",
            [](NativeMatcher& matcher, uintptr_t address, size_t words) {
                py::gil_scoped_release release;
                fill_row_at(matcher, address, words);
            },
            py::arg("address"), py::arg("words"),
            "Write the allowed-token bits into the int32 row at ``address`` (``words`` long).")
        .def(
            "fill_bools",
            [](NativeMatcher& matcher, uintptr_t address) {
                py::gil_scoped_release release;
                fill_bools_at(matcher, address);
            },
            py::arg("address"), "Write one byte per token (1: allowed) at ``address``.");

    m.def(
        "fill_rows",
        [](const std::vector<NativeMatcher*>& matchers, const std::vector<uintptr_t>& addresses,
           size_t words, int threads) {
            if (matchers.size() != addresses.size()) {
                throw std::invalid_argument("one bitmask row per matcher");
            }
            for (NativeMatcher* matcher : matchers) {
                if (matcher == nullptr) throw std::invalid_argument("a matcher is None");
            }
            py::gil_scoped_release release;
            parallel_for(matchers.size(), threads, [&](size_t i) {
                fill_row_at(*matchers[i], addresses[i], words);
            });
        },
        py::arg("matchers"), py::arg("addresses"), py::arg("words"), py::arg("threads"),
        "Fill one bitmask row per matcher, on up to ``threads`` threads, without the GIL.");
}

}  // namespace cad
