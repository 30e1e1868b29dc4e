// Three answers to "this operator has no Autograd kernel", side by side (lesson 03). Each operator
// doubles its input; only the registration at the Autograd key differs:
//   double_fallback:        nothing registered: torch's fallback for custom operators runs there
//                           (basicAutogradNotImplementedFallback; torch._C._set_autograd_fallback_mode)
//   double_fallthrough:     makeFallthrough(): the dispatcher skips the key
//   double_not_implemented: autogradNotImplementedFallback(), what torch's own operators without a
//                           derivative use: the output requires grad, and backward raises
// Each comes twice: the double_* operators double with a raw loop, which autograd cannot see into; the
// double_aten_* operators with one aten call (at::mul), which autograd can. The fallback and a
// fallthrough pass the call on with autograd still on, so that aten call records its own gradient;
// autogradNotImplementedFallback() passes it on under a guard that switches autograd off below it.
//
// And torch's ready-made pair for an in-place operator with no derivative: double_not_implemented_
// has autogradNotImplementedFallback() at Autograd and autogradNotImplementedInplaceOrViewFallback()
// at ADInplaceOrView (a guard, a redispatch, then the version bump).
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/mul.h>
#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>
#include <torch/library.h>

#include "checks.h"

namespace {

void check_float_cpu(const at::Tensor& x) {
  workbook::check_device("workbook::double_*", "x", x, c10::DeviceType::CPU);
  workbook::check_dtype("workbook::double_*", "x", x, {at::kFloat});
}

// 2 * in, element by element, into out (which may be in).
void double_into(const at::Tensor& in, at::Tensor& out) {
  const float* source = in.const_data_ptr<float>();
  float* result = out.mutable_data_ptr<float>();
  for (int64_t i = 0; i < in.numel(); ++i) result[i] = 2 * source[i];
}

at::Tensor double_raw(const at::Tensor& x) {
  check_float_cpu(x);
  const at::Tensor input = x.contiguous();
  at::Tensor out = at::empty_like(input);
  double_into(input, out);
  return out;
}

at::Tensor double_aten(const at::Tensor& x) {
  check_float_cpu(x);
  return at::mul(x, 2);
}

at::Tensor& double_raw_(at::Tensor& x) {
  check_float_cpu(x);
  TORCH_CHECK(x.is_contiguous(), "workbook::double_not_implemented_: `x` must be contiguous");
  double_into(x, x);
  return x;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(workbook, m) {
  m.def("double_fallback(Tensor x) -> Tensor");
  m.def("double_fallthrough(Tensor x) -> Tensor");
  m.def("double_not_implemented(Tensor x) -> Tensor");
  m.def("double_aten_fallback(Tensor x) -> Tensor");
  m.def("double_aten_fallthrough(Tensor x) -> Tensor");
  m.def("double_aten_not_implemented(Tensor x) -> Tensor");
  m.def("double_not_implemented_(Tensor(a!) x) -> Tensor(a!)", {at::Tag::inplace});
}

TORCH_LIBRARY_IMPL(workbook, CPU, m) {
  m.impl("double_fallback", &double_raw);
  m.impl("double_fallthrough", &double_raw);
  m.impl("double_not_implemented", &double_raw);
  m.impl("double_aten_fallback", &double_aten);
  m.impl("double_aten_fallthrough", &double_aten);
  m.impl("double_aten_not_implemented", &double_aten);
  m.impl("double_not_implemented_", &double_raw_);
}

TORCH_LIBRARY_IMPL(workbook, Autograd, m) {
  m.impl("double_fallthrough", torch::CppFunction::makeFallthrough());
  m.impl("double_not_implemented", torch::autograd::autogradNotImplementedFallback());
  m.impl("double_aten_fallthrough", torch::CppFunction::makeFallthrough());
  m.impl("double_aten_not_implemented", torch::autograd::autogradNotImplementedFallback());
  m.impl("double_not_implemented_", torch::autograd::autogradNotImplementedFallback());
}

TORCH_LIBRARY_IMPL(workbook, ADInplaceOrView, m) {
  m.impl("double_not_implemented_", torch::autograd::autogradNotImplementedInplaceOrViewFallback());
}
