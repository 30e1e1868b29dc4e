// Autograd kernels: a torch::autograd::Function per differentiable operator, registered at the
// Autograd alias key (which fills AutogradCPU, AutogradCUDA, AutogradMeta, ...).
//
// forward() runs below autograd: at::AutoDispatchBelowADInplaceOrView turns off the Autograd and
// ADInplaceOrView keys for the calls inside it, so the backend kernel is reached directly and
// autograd records this Function as one node. backward() calls the workbook's own operators
// through the dispatcher (csrc/ops.h), so it runs on any backend, and is itself differentiable
// (those calls go through these Autograd kernels again): double backward works.
#include <ATen/core/Tensor.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include "ops.h"
#include "trace.h"

namespace workbook {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class Add : public torch::autograd::Function<Add> {
 public:
  static at::Tensor forward(AutogradContext*, const at::Tensor& self, const at::Tensor& other) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return ops::add(self, other);
  }
  // d(self + other) = grad for both inputs.
  static variable_list backward(AutogradContext*, variable_list grads) { return {grads[0], grads[0]}; }
};

class Matmul : public torch::autograd::Function<Matmul> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& self, const at::Tensor& other) {
    ctx->save_for_backward({self, other});
    at::AutoDispatchBelowADInplaceOrView guard;
    return ops::matmul(self, other);
  }
  // out = self @ other:  d self = grad @ other^T,  d other = self^T @ grad.
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &self = saved[0], &other = saved[1], &grad = grads[0];
    return {ops::matmul(grad, other.t()), ops::matmul(self.t(), grad)};
  }
};

// With nothing to record (no input requires grad or carries a forward-mode tangent, or grad mode
// is off), Function::apply's bookkeeping is pure cost: about 1 us a call, more than the whole of
// aten's add on a tiny tensor (bench/dispatch_cost.py). Like torch's own autograd kernels, go
// straight below autograd then.
bool records_graph(const at::Tensor& self, const at::Tensor& other) {
  const bool backward = c10::GradMode::is_enabled() && (self.requires_grad() || other.requires_grad());
  const bool forward = self._fw_grad(/*level=*/0).defined() || other._fw_grad(/*level=*/0).defined();
  return backward || forward;
}

at::Tensor add(c10::DispatchKeySet ks, const at::Tensor& self, const at::Tensor& other) {
  trace::Scope scope("add", ks, self, other);
  if (!records_graph(self, other)) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return ops::add(self, other);
  }
  return Add::apply(self, other);
}

at::Tensor matmul(c10::DispatchKeySet ks, const at::Tensor& self, const at::Tensor& other) {
  trace::Scope scope("matmul", ks, self, other);
  if (!records_graph(self, other)) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return ops::matmul(self, other);
  }
  return Matmul::apply(self, other);
}

}  // namespace

TORCH_LIBRARY_IMPL(workbook, Autograd, m) {
  m.impl("add", &add);
  m.impl("matmul", &matmul);
}

}  // namespace workbook
