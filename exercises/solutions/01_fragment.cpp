// Exercise 01.fragment (medium): seed 004's namespace collision.
//
// A teammate adds an operator to the workbook's namespace from a library of their own:
// workbook::twice(Tensor self) -> Tensor, which returns self + self. Loaded after the workbook's schemas, this
// file is refused: loading it as it is would abort the process (lesson 01). Fix the one line that opens the
// namespace, so that both libraries live in one process and workbook::twice works.
#include <ATen/core/Tensor.h>
#include <torch/library.h>

namespace {

at::Tensor twice(const at::Tensor& self) {
  return self.add(self);
}

}  // namespace

// A second library adds to a namespace with TORCH_LIBRARY_FRAGMENT; each operator is still defined only once.
TORCH_LIBRARY_FRAGMENT(workbook, m) {
  m.def("twice(Tensor self) -> Tensor");
}

TORCH_LIBRARY_IMPL(workbook, CPU, m) {
  m.impl("twice", twice);
}
