// A view operator registered below autograd: how `row` looked before csrc/composite.cpp made it
// CompositeImplicitAutograd. The kernel builds the view with aten::as_strided at
// CompositeExplicitAutograd, so nothing is registered at the Autograd keys for the operator itself.
// It "works" in eager mode only by accident: torch's autograd fallback (which warns on backward) passes
// the call on with autograd still on, so aten::as_strided inside the kernel records the view and its
// gradient itself (a fallthrough would do the same, silently; autogradNotImplementedFallback() would
// switch autograd off below it, lesson 03). torch.compile refuses it, as functionalization does not
// support a custom operator whose output aliases an input (lesson 03, section 6).
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include "checks.h"
#include "trace.h"

namespace {

at::Tensor row_strided(c10::DispatchKeySet ks, const at::Tensor& self, int64_t index) {
  workbook::trace::Scope scope("row_strided", ks, self);
  constexpr const char* op = "workbook::row_strided";
  workbook::check_strided(op, "self", self);
  workbook::check_dim(op, "self", self, 2);
  const int64_t rows = self.size(0);
  TORCH_CHECK(-rows <= index && index < rows, op, ": `index` ", index, " is out of range for ", rows, " rows");
  if (index < 0) index += rows;
  return self.as_strided({self.size(1)}, {self.stride(1)}, self.storage_offset() + index * self.stride(0));
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(workbook, m) {
  m.def("row_strided(Tensor(a) self, int index) -> Tensor(a)");
}

TORCH_LIBRARY_IMPL(workbook, CompositeExplicitAutograd, m) {
  m.impl("row_strided", &row_strided);
}
