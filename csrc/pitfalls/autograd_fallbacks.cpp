// Three answers to "this operator has no Autograd kernel", side by side (lesson 03). Each operator
// doubles its input with a raw loop, which autograd cannot see into; only the registration at the
// Autograd key differs:
//   double_fallback:        nothing registered: torch's fallback for custom operators runs there
//                           (basicAutogradNotImplementedFallback; torch._C._set_autograd_fallback_mode)
//   double_fallthrough:     makeFallthrough(): the dispatcher skips the key; no autograd at all
//   double_not_implemented: autogradNotImplementedFallback(), what torch's own operators without a
//                           derivative use: the output requires grad, and backward raises
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>
#include <torch/library.h>

#include "checks.h"

namespace {

at::Tensor double_raw(const at::Tensor& x) {
  workbook::check_device("workbook::double_*", "x", x, c10::DeviceType::CPU);
  workbook::check_dtype("workbook::double_*", "x", x, {at::kFloat});
  const at::Tensor input = x.contiguous();
  at::Tensor out = at::empty_like(input);
  const float* in = input.const_data_ptr<float>();
  float* result = out.mutable_data_ptr<float>();
  for (int64_t i = 0; i < input.numel(); ++i) result[i] = 2 * in[i];
  return out;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(workbook, m) {
  m.def("double_fallback(Tensor x) -> Tensor");
  m.def("double_fallthrough(Tensor x) -> Tensor");
  m.def("double_not_implemented(Tensor x) -> Tensor");
}

TORCH_LIBRARY_IMPL(workbook, CPU, m) {
  m.impl("double_fallback", &double_raw);
  m.impl("double_fallthrough", &double_raw);
  m.impl("double_not_implemented", &double_raw);
}

TORCH_LIBRARY_IMPL(workbook, Autograd, m) {
  m.impl("double_fallthrough", torch::CppFunction::makeFallthrough());
  m.impl("double_not_implemented", torch::autograd::autogradNotImplementedFallback());
}
