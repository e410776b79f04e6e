// Bindings every native matcher shares: filling one bitmask row, or many rows on threads.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <vector>

#include "bind_rows.h"
#include "parallel.h"

namespace py = pybind11;

namespace cad {

namespace {

// A bitmask row a matcher filled: the tensor (held), the data pointer it had when checked,
// and the row's address and width.
struct BoundRow {
    py::object tensor;
    int64_t row;
    uintptr_t data;
    uintptr_t address;
    size_t words;
};

uintptr_t data_pointer(py::handle tensor) {
    static PyObject* const name = PyUnicode_InternFromString("data_ptr");  // never freed
    py::object value =
        py::reinterpret_steal<py::object>(PyObject_CallMethodNoArgs(tensor.ptr(), name));
    if (!value) throw py::error_already_set();
    return value.cast<uintptr_t>();
}

// Where ``bitmask[row]`` lies, checked by ``cad.grammar.bitmask.row_address`` (which raises
// the errors a caller should see for a wrong tensor), as the matcher's bound row.
BoundRow* bind_row(NativeMatcher& matcher, py::object bitmask, int64_t row) {
    static PyObject* const row_address =  // never freed
        py::object(py::module_::import("cad.grammar.bitmask").attr("row_address"))
            .release()
            .ptr();
    const py::tuple at = py::handle(row_address)(bitmask, row);
    const uintptr_t data = data_pointer(bitmask);
    auto bound = std::make_shared<BoundRow>(
        BoundRow{std::move(bitmask), row, data, at[0].cast<uintptr_t>(), at[1].cast<size_t>()});
    matcher.bound_row = bound;
    return bound.get();
}

}  // namespace

void bind_batch(py::module_& m) {
    m.def(
        "masked_argmax",
        [](uintptr_t logits, size_t width, uintptr_t row, size_t words) {
            return masked_argmax(reinterpret_cast<const float*>(logits), width,
                                 reinterpret_cast<const uint32_t*>(row), words);
        },
        py::arg("logits"), py::arg("width"), py::arg("row"), py::arg("words"),
        py::call_guard<py::gil_scoped_release>(),
        "The allowed id with the highest of ``width`` float32 logits at address ``logits``, "
        "under the packed bitmask row of ``words`` int32 words at address ``row``: the lowest "
        "id among equals, never a NaN; -1 when no allowed id has a logit other than NaN.");

    m.def(
        "allowed_ids",
        [](uintptr_t row, size_t words, size_t width, uintptr_t out, size_t limit) {
            return allowed_ids(reinterpret_cast<const uint32_t*>(row), words, width,
                               reinterpret_cast<int32_t*>(out), limit);
        },
        py::arg("row"), py::arg("words"), py::arg("width"), py::arg("out"), py::arg("limit"),
        py::call_guard<py::gil_scoped_release>(),
        "The allowed ids below ``width`` of the packed bitmask row of ``words`` int32 words at "
        "address ``row``, written in increasing order as int32 to ``out`` (room for ``limit``): "
        "how many, or -1 as soon as there are more than ``limit``.");

    py::class_<NativeMatcher>(m, "NativeMatcher", "Base of every native matcher.")
        .def_property_readonly("vocab_size", &NativeMatcher::vocab_size)
        .def(
            "fill_next_token_bitmask",
            [](NativeMatcher& matcher, py::object bitmask, int64_t row) {
                auto* bound = static_cast<BoundRow*>(matcher.bound_row.get());
                if (bound == nullptr || !bound->tensor.is(bitmask) || bound->row != row ||
                    bound->data != data_pointer(bitmask)) {
                    bound = bind_row(matcher, std::move(bitmask), row);
                }
                const uintptr_t address = bound->address;
                const size_t words = bound->words;
                py::gil_scoped_release release;
                fill_row_at(matcher, address, words);
            },
            py::arg("bitmask"), py::arg("row") = 0,
            "Write the allowed tokens into ``bitmask[row]`` (a CPU int32 tensor; packed, "
            "end-of-sequence where the language may end). The row is checked once and "
            "remembered while the tensor keeps its storage.")
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
