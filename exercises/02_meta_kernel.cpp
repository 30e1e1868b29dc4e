// Exercise 02.meta_kernel (hard): a Meta kernel for every shape, dtype and size, even an unknown one.
//
// exercise02::outer(Tensor a, Tensor b) -> Tensor is the outer product of two float32 or float64 tensors of any shapes
// (as numpy.multiply.outer): out[i..., j...] = a[i...] * b[j...], of shape a.shape + b.shape. Its CPU kernel is
// written. Its Meta kernel, which torch.compile and torch.export run on fake tensors to learn the output's shape,
// dtype, device and strides, is wrong. Fix it. The check calls it on meta tensors of ranks 0 to 6 (and outputs of rank
// 64 and 65, of 2**31 and 2**32 elements, and with a stride of 2**32), empty, transposed and channels_last ones
// included, with every pair of dtypes the CPU kernel accepts, and compares its output with the CPU kernel's (shape,
// dtype, device, strides where they matter: as torch compares them, those of dimensions longer than 1 in a tensor with
// elements; a new tensor at each call, neither a view (of an input, or of a tensor the kernel made) nor an inference
// tensor); the kernel keeps none of a call's tensors once it returns. It must refuse what the CPU kernel refuses (the
// check tries other dtypes, and a CPU tensor with a meta one, empty ones too). Under torch.compile(dynamic=True) sizes
// are symbols: the check compiles a function that calls it once, for three sizes, and calls it on sizes no trace knows
// (the count of x[x > 0], an unbacked symbol: in `a`, in `b` and in both) and from four threads at once; sparse (COO,
// CSR) and mkldnn CPU tensors, which no kernel of outer's computes for, must find none (nor may CUDA tensors, nor
// sparse fake ones, as torch.compile traces them: the check reads the dispatch table).
#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/result_type.h>
#include <torch/library.h>

#include <vector>

namespace {

bool float_or_double(const at::Tensor& t) {
  return t.scalar_type() == at::kFloat || t.scalar_type() == at::kDouble;
}

void check_inputs(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(float_or_double(a) && float_or_double(b), "exercise02::outer: float32 or float64 tensors only, got ",
              a.scalar_type(), " and ", b.scalar_type());
  TORCH_CHECK(a.device() == b.device(), "exercise02::outer: `a` is on ", a.device(), ", `b` on ", b.device());
}

at::Tensor outer_cpu(const at::Tensor& a, const at::Tensor& b) {
  check_inputs(a, b);
  // The dtype of a * b: torch's type promotion, in which a 0-d tensor weighs less than one with dimensions.
  const at::ScalarType dtype = at::result_type(a, b);
  std::vector<int64_t> sizes(a.sizes().begin(), a.sizes().end());
  sizes.insert(sizes.end(), b.sizes().begin(), b.sizes().end());
  at::Tensor out = at::empty(sizes, a.options().dtype(dtype));
  const at::Tensor ac = a.to(dtype).contiguous(), bc = b.to(dtype).contiguous();
  AT_DISPATCH_FLOATING_TYPES(dtype, "exercise02::outer", [&] {
    const scalar_t* pa = ac.const_data_ptr<scalar_t>();
    const scalar_t* pb = bc.const_data_ptr<scalar_t>();
    scalar_t* po = out.mutable_data_ptr<scalar_t>();
    const int64_t n = ac.numel(), m = bc.numel();
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) po[i * m + j] = pa[i] * pb[j];
  });
  return out;
}

at::Tensor outer_meta(const at::Tensor& a, const at::Tensor& b) {
  check_inputs(a, b);
  return at::empty({a.size(0)}, a.options());  // TODO: the output outer_cpu returns, for every shape and dtype
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
