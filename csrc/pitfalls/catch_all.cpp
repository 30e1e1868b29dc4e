// PITFALL (pytorch#101322): m.def(schema, function) declares the operator AND registers the
// function as its kernel for every dispatch key: it becomes a CompositeImplicitAutograd kernel.
// A raw CPU loop registered this way also runs for meta tensors (which have no data), for CUDA
// tensors (a host loop over device memory), and above autograd, where it silently drops gradients.
// Declare with m.def(schema) and register per key with TORCH_LIBRARY_IMPL instead.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "trace.h"

namespace {

at::Tensor sum_everywhere(c10::DispatchKeySet ks, const at::Tensor& self) {
  workbook::trace::Scope scope("sum_everywhere", ks, self);
  const float* data = self.const_data_ptr<float>();  // assumes float32, contiguous, on the CPU
  double total = 0;
  for (int64_t i = 0; i < self.numel(); ++i) total += data[i];
  at::Tensor out = at::empty({}, self.options());
  *out.mutable_data_ptr<float>() = static_cast<float>(total);
  return out;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(workbook, m) {
  m.def("sum_everywhere(Tensor self) -> Tensor", &sum_everywhere);
}
