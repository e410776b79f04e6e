// The native masking core: Python bindings of the compiled hot paths (``cad.grammar._native``).
#include <pybind11/pybind11.h>

#include "bind_rows.h"

namespace py = pybind11;

void bind_syntax(py::module_& m);

PYBIND11_MODULE(_native, m) {
    m.doc() = "Compiled hot paths of the masking core.";
    m.attr("ABI_VERSION") = 7;
    cad::bind_batch(m);
    cad::bind_vocabulary(m);
    cad::bind_program(m);
    cad::bind_cfg(m);
    cad::bind_lowering(m);
    bind_syntax(m);
}
