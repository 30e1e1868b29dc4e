// PITFALL (lesson 04): a Function whose forward calls its operator again with no guard.
//
// workbook::twice(x) = 2 * x. Its Autograd kernel is written as csrc/autograd.cpp's are: it applies the
// Function only when there is a graph to record (grad mode on and an input that requires grad, or an
// input with a forward-mode tangent), else it goes below autograd. The Function's forward lacks
// at::AutoDispatchBelowADInplaceOrView, so its call comes back to that Autograd kernel:
//   - with an input that requires grad: Function::apply switched grad mode off for forward, so the
//     second visit finds nothing to record and goes below: correct, one redundant pass;
//   - with a forward-mode tangent: Function::apply does not switch forward-mode AD off, so the second
//     visit applies the Function again, whose forward calls again, ... until the stack overflows.
// A kernel that always applies its Function (as wrong_backward.cpp's does) recurses on every call.
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/mul.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include "trace.h"

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

const c10::TypedOperatorHandle<at::Tensor(const at::Tensor&)>& twice_op() {
  static const auto op =
      c10::Dispatcher::singleton().findSchemaOrThrow("workbook::twice", "").typed<at::Tensor(const at::Tensor&)>();
  return op;
}

class TwiceWithoutGuard : public torch::autograd::Function<TwiceWithoutGuard> {
 public:
  static at::Tensor forward(AutogradContext*, const at::Tensor& x) {
    // Missing: at::AutoDispatchBelowADInplaceOrView guard;
    return twice_op().call(x);
  }
  static variable_list backward(AutogradContext*, variable_list grads) { return {at::mul(grads[0], 2)}; }
};

at::Tensor twice_cpu(c10::DispatchKeySet ks, const at::Tensor& x) {
  workbook::trace::Scope scope("twice", ks, x);
  return at::mul(x, 2);
}

at::Tensor twice_autograd(c10::DispatchKeySet ks, const at::Tensor& x) {
  workbook::trace::Scope scope("twice", ks, x);
  const bool records_graph =
      (c10::GradMode::is_enabled() && x.requires_grad()) || x._fw_grad(/*level=*/0).defined();
  if (!records_graph) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return twice_op().call(x);
  }
  return TwiceWithoutGuard::apply(x);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(workbook, m) {
  m.def("twice(Tensor x) -> Tensor");
}

TORCH_LIBRARY_IMPL(workbook, CPU, m) {
  m.impl("twice", &twice_cpu);
}

TORCH_LIBRARY_IMPL(workbook, Autograd, m) {
  m.impl("twice", &twice_autograd);
}
