// Exercise 05.autocast_guard (hard): an Autocast kernel that does not call itself.
//
// exercise05::double_it(Tensor x) -> Tensor returns x * 2, from a raw loop (its CPU kernel); the check gives it a
// backward from Python. Its AutocastCPU kernel should run it in bfloat16 inside torch.autocast("cpu"): cast x, then
// call the operator again through the dispatcher, so that every layer below autocast (autograd, then the CPU kernel)
// still runs. As written, the call never reaches the CPU kernel. Find out why (run the check: it runs in a process of
// its own) and fix it with one line. The check calls it twice in one region and once after it, records the dtype the
// layers below autocast run it in, and compares the thread-local include and exclude sets before and after each call.
#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/empty_like.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>

namespace {

at::Tensor double_it_cpu(const at::Tensor& x) {
  // A raw loop, as a real kernel's would be: autograd cannot see inside it.
  const at::Tensor input = x.contiguous();
  at::Tensor out = at::empty_like(input);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, input.scalar_type(), "exercise05::double_it", [&] {
    const scalar_t* in = input.const_data_ptr<scalar_t>();
    scalar_t* result = out.mutable_data_ptr<scalar_t>();
    for (int64_t i = 0; i < input.numel(); ++i) result[i] = in[i] * scalar_t(2);
  });
  return out;
}

at::Tensor double_it_autocast(const at::Tensor& x) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("exercise05::double_it", "")
                             .typed<at::Tensor(const at::Tensor&)>();
  // TODO: the call below starts again from the highest key of the call's keyset.
  return op.call(x.to(at::kBFloat16));
}

}  // namespace

TORCH_LIBRARY(exercise05, m) {
  m.def("double_it(Tensor x) -> Tensor");
}

TORCH_LIBRARY_IMPL(exercise05, CPU, m) {
  m.impl("double_it", double_it_cpu);
}

TORCH_LIBRARY_IMPL(exercise05, AutocastCPU, m) {
  m.impl("double_it", double_it_autocast);
}
