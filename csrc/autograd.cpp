// Autograd kernels: a torch::autograd::Function per differentiable operator, registered at the Autograd alias key
// (which fills AutogradCPU, AutogradCUDA, AutogradMeta, ...).
//
// forward() runs below autograd: at::AutoDispatchBelowADInplaceOrView turns off the Autograd and ADInplaceOrView keys
// for the calls inside it, so the backend kernel is reached directly and autograd records this Function as one node.
// backward() calls the workbook's operators through the dispatcher (csrc/ops.h): any backend, and double backward.
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/div.h>
#include <torch/autograd.h>
#include <torch/csrc/autograd/VariableTypeUtils.h>  // check_inplace: torch's own test before an in-place write
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

// In place: x += other. forward writes into x and returns it; mark_dirty tells autograd that x was modified, and
// Function::apply then bumps x's version and moves x's history onto this node (the gradient that reaches x from
// later uses flows back through it, to the old x and to other). That is what torch's own add_ does.
class AddInPlace : public torch::autograd::Function<AddInPlace> {
 public:
  static at::Tensor forward(AutogradContext* ctx, at::Tensor x, const at::Tensor& other) {
    {
      at::AutoDispatchBelowADInplaceOrView guard;
      ops::add_(x, other);
    }
    ctx->mark_dirty({x});
    return x;
  }
  // d(x + other) = grad for the old x and for other, as for add.
  static variable_list backward(AutogradContext*, variable_list grads) { return {grads[0], grads[0]}; }
};

class Matmul : public torch::autograd::Function<Matmul> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& self, const at::Tensor& other) {
    ctx->save_for_backward({self, other});
    at::AutoDispatchBelowADInplaceOrView guard;
    return ops::matmul(self, other);
  }
  // out = self @ other:  d self = grad @ other^T,  d other = self^T @ grad; each only if needed (needs_input_grad).
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &self = saved[0], &other = saved[1], &grad = grads[0];
    return {ctx->needs_input_grad(0) ? ops::matmul(grad, other.t()) : at::Tensor(),
            ctx->needs_input_grad(1) ? ops::matmul(self.t(), grad) : at::Tensor()};
  }
};

// sum and mean: every element contributes once (mean: 1/numel), so the input's gradient is the output's, spread
// over the input's shape. Only the shape and dtype are saved, not the tensor.
class Sum : public torch::autograd::Function<Sum> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& self, std::optional<c10::ScalarType> dtype) {
    ctx->saved_data["sizes"] = c10::IValue(self.sym_sizes());
    ctx->saved_data["dtype"] = self.scalar_type();
    at::AutoDispatchBelowADInplaceOrView guard;
    return ops::sum(self, dtype);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    // Back to the input's dtype (sum(x, dtype=torch.float64) of a float32 x), then the input's shape. The dtype
    // argument gets no gradient.
    const auto sizes = ctx->saved_data["sizes"].toSymIntVector();
    return {grads[0].to(ctx->saved_data["dtype"].toScalarType()).expand_symint(sizes), at::Tensor()};
  }
};

class Mean : public torch::autograd::Function<Mean> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& self) {
    ctx->saved_data["sizes"] = c10::IValue(self.sym_sizes());
    ctx->saved_data["numel"] = c10::IValue(self.sym_numel());
    at::AutoDispatchBelowADInplaceOrView guard;
    return ops::mean(self);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto sizes = ctx->saved_data["sizes"].toSymIntVector();
    return {at::div(grads[0].expand_symint(sizes), ctx->saved_data["numel"].toSymInt())};
  }
};

// With nothing to record (no input requires grad or carries a forward-mode tangent, or grad mode is off),
// Function::apply's bookkeeping is pure cost: about 1 us a call, more than the whole of aten's add on a tiny tensor
// (bench/dispatch_cost.py). Like torch's own autograd kernels, go straight below autograd then.
template <typename... Tensors>
bool records_graph(const Tensors&... tensors) {
  const bool backward = c10::GradMode::is_enabled() && (tensors.requires_grad() || ...);
  const bool forward = (tensors._fw_grad(/*level=*/0).defined() || ...);
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

// The op itself, for the calls below that redispatch rather than call it again from the top.
template <typename Signature>
c10::TypedOperatorHandle<Signature> handle(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Signature>();
}

at::Tensor& add_(c10::DispatchKeySet ks, at::Tensor& x, const at::Tensor& other) {
  trace::Scope scope("add_", ks, x, other);
  if (!records_graph(x, other)) {
    // Nothing to record, but the write must still bump x's version: so not a guard that skips ADInplaceOrView too
    // (as add's does), but a redispatch to the keys after autograd, ADInplaceOrView first (lesson 03), paired, as in
    // torch's generated kernels, with a guard that keeps any call made below out of autograd.
    at::AutoDispatchBelowAutograd below_autograd;
    static const auto op = handle<at::Tensor&(at::Tensor&, const at::Tensor&)>("workbook::add_");
    return op.redispatch(ks & c10::after_autograd_keyset, x, other);
  }
  torch::autograd::check_inplace(x, x.requires_grad() || other.requires_grad());  // a leaf? refused before the write
  AddInPlace::apply(x, other);
  return x;
}

// out= writes into a tensor autograd knows nothing about, so no graph can connect it to the inputs: refused when a
// graph would be needed, as aten's out= overloads (and torch.library.custom_op with Tag.out) refuse it.
at::Tensor& add_out(c10::DispatchKeySet ks, const at::Tensor& x, const at::Tensor& other, at::Tensor& out) {
  trace::Scope scope("add_out", ks, x, other, out);
  TORCH_CHECK(!records_graph(x, other, out),
              "workbook::add_out(): functions with out=... arguments don't support automatic differentiation, but one "
              "of the arguments requires grad. Call workbook::add instead.");
  at::AutoDispatchBelowAutograd below_autograd;  // as with add_'s redispatch
  static const auto op = handle<at::Tensor&(const at::Tensor&, const at::Tensor&, at::Tensor&)>("workbook::add_out");
  return op.redispatch(ks & c10::after_autograd_keyset, x, other, out);
}

at::Tensor matmul(c10::DispatchKeySet ks, const at::Tensor& self, const at::Tensor& other) {
  trace::Scope scope("matmul", ks, self, other);
  if (!records_graph(self, other)) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return ops::matmul(self, other);
  }
  return Matmul::apply(self, other);
}

at::Tensor sum(c10::DispatchKeySet ks, const at::Tensor& self, std::optional<c10::ScalarType> dtype) {
  trace::Scope scope("sum", ks, self);
  if (!records_graph(self)) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return ops::sum(self, dtype);
  }
  return Sum::apply(self, dtype);
}

at::Tensor mean(c10::DispatchKeySet ks, const at::Tensor& self) {
  trace::Scope scope("mean", ks, self);
  if (!records_graph(self)) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return ops::mean(self);
  }
  return Mean::apply(self);
}

}  // namespace

TORCH_LIBRARY_IMPL(workbook, Autograd, m) {
  m.impl("add", &add);
  m.impl("add_", &add_);
  m.impl("add_out", &add_out);
  m.impl("matmul", &matmul);
  m.impl("sum", &sum);
  m.impl("mean", &mean);
}

}  // namespace workbook
