// Exercise 02.meta_kernel (hard): a Meta kernel for every size, even an unknown one.
//
// exercise02::outer(Tensor a, Tensor b) -> Tensor is the outer product of two 1-D float32 tensors: out[i][j] =
// a[i] * b[j], of shape (len(a), len(b)). Its CPU kernel is written. Its Meta kernel, which torch.compile and
// torch.export run on fake tensors to learn the output's shape, dtype and device, returns the wrong shape. Fix it so
// that it is right on meta tensors, and under torch.compile(dynamic=True), where sizes are symbols: the check compiles
// a function that calls it once, for three sizes.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

namespace {

void check_inputs(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.dim() == 1, "exercise02::outer: `a` must be 1-D, got ", a.dim(), "-D");
  TORCH_CHECK(b.dim() == 1, "exercise02::outer: `b` must be 1-D, got ", b.dim(), "-D");
  TORCH_CHECK(a.scalar_type() == at::kFloat && b.scalar_type() == at::kFloat, "exercise02::outer: float32 only");
}

at::Tensor outer_cpu(const at::Tensor& a, const at::Tensor& b) {
  check_inputs(a, b);
  at::Tensor out = at::empty({a.size(0), b.size(0)}, a.options());
  const at::Tensor ac = a.contiguous(), bc = b.contiguous();
  const float* pa = ac.const_data_ptr<float>();
  const float* pb = bc.const_data_ptr<float>();
  float* po = out.mutable_data_ptr<float>();
  for (int64_t i = 0; i < a.size(0); ++i)
    for (int64_t j = 0; j < b.size(0); ++j) po[i * b.size(0) + j] = pa[i] * pb[j];
  return out;
}

at::Tensor outer_meta(const at::Tensor& a, const at::Tensor& b) {
  check_inputs(a, b);
  return at::empty({a.size(0)}, a.options());  // TODO: the output's shape is (len(a), len(b))
}

}  // namespace

TORCH_LIBRARY(exercise02, m) {
  m.def("outer(Tensor a, Tensor b) -> Tensor");
}

TORCH_LIBRARY_IMPL(exercise02, CPU, m) {
  m.impl("outer", outer_cpu);
}

TORCH_LIBRARY_IMPL(exercise02, Meta, m) {
  m.impl("outer", outer_meta);
}
