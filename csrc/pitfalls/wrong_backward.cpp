// PITFALL: a backward formula with a mistake in it. Nothing fails when it runs: autograd trusts
// whatever backward returns. Only a numerical check (torch.autograd.gradcheck) finds it.
// Lesson 04 loads this, watches gradcheck fail, then loads csrc/autograd.cpp over it.
#include <ATen/core/Tensor.h>
#include <ATen/ops/mul.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include "ops.h"
#include "trace.h"

namespace {

class WrongAdd : public torch::autograd::Function<WrongAdd> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext*, const at::Tensor& self, const at::Tensor& other) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return workbook::ops::add(self, other);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext*, torch::autograd::variable_list grads) {
    return {grads[0], at::mul(grads[0], 2)};  // wrong: d(self + other)/d other is 1, not 2
  }
};

at::Tensor add(c10::DispatchKeySet ks, const at::Tensor& self, const at::Tensor& other) {
  workbook::trace::Scope scope("add", ks, self, other);
  return WrongAdd::apply(self, other);
}

}  // namespace

TORCH_LIBRARY_IMPL(workbook, Autograd, m) {
  m.impl("add", &add);
}
