// PITFALL: the guard older tutorials use in forward, at::AutoNonVariableTypeMode. It still
// compiles and works, but it is deprecated: it prints a warning (once, from C++, on stderr) and
// may go away. Use at::AutoDispatchBelowADInplaceOrView, as csrc/autograd.cpp does.
#include <ATen/core/Tensor.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include "ops.h"

namespace {

class OldStyleAdd : public torch::autograd::Function<OldStyleAdd> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext*, const at::Tensor& self, const at::Tensor& other) {
    at::AutoNonVariableTypeMode guard;  // deprecated
    return workbook::ops::add(self, other);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext*, torch::autograd::variable_list grads) {
    return {grads[0], grads[0]};
  }
};

at::Tensor add(const at::Tensor& self, const at::Tensor& other) { return OldStyleAdd::apply(self, other); }

}  // namespace

TORCH_LIBRARY_IMPL(workbook, Autograd, m) {
  m.impl("add", &add);
}
