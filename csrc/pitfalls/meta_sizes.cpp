// PITFALL: a Meta kernel that reads sizes as plain integers (sizes(), size(i)) and creates its output
// with at::empty. Nothing fails: opcheck passes, torch.compile(dynamic=True) compiles, fake tensors get
// the right shapes. But reading a symbolic size as an integer turns the symbol into the number it holds
// now, and records a guard on it: the compiled graph holds for that size only, and the next size compiles
// again. torch.export with a torch.export.Dim on that dimension refuses. Lesson 06 shows all of it, beside
// workbook::matmul, whose Meta kernel (csrc/meta.cpp) reads SymInts and uses at::empty_symint.
//
// workbook::matmul_sizes is workbook::matmul with this Meta kernel: its CPU kernel calls workbook::matmul.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "checks.h"
#include "ops.h"

namespace {

at::Tensor matmul_sizes_cpu(const at::Tensor& self, const at::Tensor& other) {
  return workbook::ops::matmul(self, other);
}

at::Tensor matmul_sizes_meta(const at::Tensor& self, const at::Tensor& other) {
  workbook::check_device("workbook::matmul_sizes", "self", self, c10::DeviceType::Meta);
  workbook::check_device("workbook::matmul_sizes", "other", other, c10::DeviceType::Meta);
  TORCH_CHECK(self.dim() == 2 && other.dim() == 2, "workbook::matmul_sizes: both inputs must be 2-D");
  TORCH_CHECK(self.sizes()[1] == other.sizes()[0], "workbook::matmul_sizes: ", self.sizes(), " @ ", other.sizes());
  return at::empty({self.sizes()[0], other.sizes()[1]}, self.options());  // WRONG: sizes(), not sym_sizes()
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(workbook, m) {
  m.def("matmul_sizes(Tensor self, Tensor other) -> Tensor");
}

TORCH_LIBRARY_IMPL(workbook, CPU, m) {
  m.impl("matmul_sizes", &matmul_sizes_cpu);
}

TORCH_LIBRARY_IMPL(workbook, Meta, m) {
  m.impl("matmul_sizes", &matmul_sizes_meta);
}
