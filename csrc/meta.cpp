// Meta kernels: shapes and dtypes only, no data. A meta tensor has sizes, strides and a dtype but
// no memory, so these kernels run the same argument checks as the CPU kernels and create empty
// outputs of the right shape. torch.compile and torch.export trace operators with "fake" tensors
// that use exactly these kernels, so an operator without them cannot be compiled or exported.
//
// Sizes are read as SymInts (sym_sizes(), sym_size(i)) and outputs made with at::empty_symint: under
// torch.compile(dynamic=True) or an export with torch.export.Dim, a size is a symbol (s0) rather than a
// number, and sizes() would hand back the symbol's current value and pin the size to it with a guard: one compile
// per size, and an export with a Dim refused (lessons 06 and 10). On concrete sizes the SymInts are plain numbers.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "checks.h"
#include "trace.h"

namespace workbook {
namespace {

constexpr auto kMeta = c10::DeviceType::Meta;

at::Tensor add(c10::DispatchKeySet ks, const at::Tensor& self, const at::Tensor& other) {
  trace::Scope scope("add", ks, self, other);
  check_device("workbook::add", "self", self, kMeta);
  check_device("workbook::add", "other", other, kMeta);
  check_add_inputs("workbook::add", "self", self, other);
  return at::empty_symint(self.sym_sizes(), self.options());
}

// The in-place and out= kernels write nothing (there is no data): they check, and return what they would write.
at::Tensor& add_(c10::DispatchKeySet ks, at::Tensor& x, const at::Tensor& other) {
  trace::Scope scope("add_", ks, x, other);
  check_device("workbook::add_", "x", x, kMeta);
  check_device("workbook::add_", "other", other, kMeta);
  check_add_inputs("workbook::add_", "x", x, other);
  check_writable("workbook::add_", "x", x);
  return x;
}

at::Tensor& add_out(c10::DispatchKeySet ks, const at::Tensor& x, const at::Tensor& other, at::Tensor& out) {
  trace::Scope scope("add_out", ks, x, other, out);
  check_device("workbook::add_out", "x", x, kMeta);
  check_device("workbook::add_out", "other", other, kMeta);
  check_device("workbook::add_out", "out", out, kMeta);
  check_add_inputs("workbook::add_out", "x", x, other);
  check_add_out("workbook::add_out", out, x);
  return out;
}

at::Tensor sum(c10::DispatchKeySet ks, const at::Tensor& self, std::optional<c10::ScalarType> dtype) {
  trace::Scope scope("sum", ks, self);
  check_device("workbook::sum", "self", self, kMeta);
  const auto result_dtype = check_sum_inputs("workbook::sum", self, dtype);
  return at::empty({}, self.options().dtype(result_dtype));
}

at::Tensor all_reduce(c10::DispatchKeySet ks, const at::Tensor& self) {
  trace::Scope scope("all_reduce", ks, self);
  check_device("workbook::all_reduce", "self", self, kMeta);
  check_all_reduce_inputs("workbook::all_reduce", self);
  return at::empty({}, self.options().dtype(at::kLong));
}

at::Tensor matmul(c10::DispatchKeySet ks, const at::Tensor& self, const at::Tensor& other) {
  trace::Scope scope("matmul", ks, self, other);
  check_device("workbook::matmul", "self", self, kMeta);
  check_device("workbook::matmul", "other", other, kMeta);
  check_matmul_inputs("workbook::matmul", self, other);
  return at::empty_symint({self.sym_size(0), other.sym_size(1)}, self.options());
}

}  // namespace

TORCH_LIBRARY_IMPL(workbook, Meta, m) {
  m.impl("add", &add);
  m.impl("add_", &add_);
  m.impl("add_out", &add_out);
  m.impl("sum", &sum);
  m.impl("all_reduce", &all_reduce);
  m.impl("matmul", &matmul);
}

}  // namespace workbook
