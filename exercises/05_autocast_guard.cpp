// Exercise 05.autocast_guard (hard): an Autocast kernel in float32, for a list of tensors and an optional one.
//
// exercise05::sum_squares(Tensor[] xs, Tensor? scale=None) -> Tensor returns xs[0]**2 + xs[1]**2 + ..., times scale
// when there is one, from a raw loop (its CPU kernel) that accumulates in its inputs' dtype and refuses two dtypes; the
// check gives it a backward from Python. In bfloat16 each partial sum keeps 8 bits, and in float16 a square above 65504
// overflows, so inside torch.autocast("cpu") it must run in float32 (the float32 policy: lesson 05, section 7 and
// summary). Write its AutocastCPU kernel (and register nothing at another key), in C++ as lesson 05, section 2 shows:
// cast every eligible input (section 2: which tensors autocast casts), every tensor of xs and scale when there is one,
// to float32, and call the operator again through the dispatcher, so that every layer below autocast (autograd, then
// the CPU kernel) still runs. Either include ATen/autocast_mode.h and use its cast, or write the eligibility rule by
// hand (section 2, "The build", says what the include costs). As written, it calls the operator again as it is: run the
// check to see what happens (it runs in a process of its own). The check's first call runs under torch.inference_mode()
// (a warm-up); then it calls it ten times in one region (float32, bfloat16 and float16 inputs without scale; bfloat16
// ones with a bfloat16 scale; float32 ones with a bfloat16 scale; float8_e5m2, float8_e5m2fnuz, float8_e4m3fn,
// float8_e4m3fnuz and float8_e8m0fnu ones, one dtype a call; float16 ones with a float16 scale; float8_e4m3fn ones with
// a float8_e4m3fn scale), on float64 inputs, on float64 xs with a bfloat16 scale, on bfloat16 xs with a scale on the
// meta device (another device's) and on meta xs and on xs of a GPU (stand-in tensors whose device is cuda, then xpu,
// then mps, hpu, privateuseone and others: no GPU needed) with a CPU scale, on int64, complex64, int8, uint8 and bool
// ones and on xs of two dtypes (which the CPU kernel refuses) in the region, once with shapes it refuses, and once
// after the region; then in three more regions on the same tensors, changed in between (in place under no_grad, then
// through `.data`). It records the dtypes the layers below autocast receive, checks the results and gradients, whether
// the tensors it gave are freed after their calls (a refused call's too), and compares the thread-local include and
// exclude sets, and autocast's own settings (its dtype, its cast cache, whether it is on), before and after each call,
// the refused ones included. Last, a region on an empty batch (bfloat16 xs with no rows), one on xs of nine tensors,
// and calls from four threads at once. It also calls it on an empty xs, with a scale, in a region under
// torch.func.functionalize, and, in a process of its own, first on xs of another device, then on the CPU's.
#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/zeros_like.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>

#include <optional>
#include <vector>

namespace {

void check_like_first(const at::Tensor& first, const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.scalar_type() == first.scalar_type() && t.sizes() == first.sizes(), "exercise05::sum_squares: ",
              name, " has dtype ", t.scalar_type(), " and shape ", t.sizes(), ", xs[0] ", first.scalar_type(), " and ",
              first.sizes(), ": they must match");
}

at::Tensor sum_squares_cpu(at::TensorList xs, const std::optional<at::Tensor>& scale) {
  TORCH_CHECK(!xs.empty(), "exercise05::sum_squares: xs is empty");
  for (const at::Tensor& x : xs) check_like_first(xs[0], x, "a tensor of xs");
  if (scale) check_like_first(xs[0], *scale, "scale");
  at::Tensor out = at::zeros_like(xs[0], at::MemoryFormat::Contiguous);
  // A raw loop, as a real kernel's would be: autograd cannot see inside it. Each sum is rounded to scalar_t.
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, out.scalar_type(), "exercise05::sum_squares", [&] {
    scalar_t* result = out.mutable_data_ptr<scalar_t>();
    for (const at::Tensor& x : xs) {
      const at::Tensor input = x.contiguous();
      const scalar_t* in = input.const_data_ptr<scalar_t>();
      for (int64_t i = 0; i < out.numel(); ++i) result[i] += in[i] * in[i];
    }
    if (scale) {
      const at::Tensor factor = scale->contiguous();
      const scalar_t* by = factor.const_data_ptr<scalar_t>();
      for (int64_t i = 0; i < out.numel(); ++i) result[i] *= by[i];
    }
  });
  return out;
}

at::Tensor sum_squares_autocast(at::TensorList xs, const std::optional<at::Tensor>& scale) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("exercise05::sum_squares", "")
                             .typed<at::Tensor(at::TensorList, const std::optional<at::Tensor>&)>();
  return op.call(xs, scale);  // TODO: in float32, below autocast
}

}  // namespace

TORCH_LIBRARY(exercise05, m) {
  m.def("sum_squares(Tensor[] xs, Tensor? scale=None) -> Tensor");
}

TORCH_LIBRARY_IMPL(exercise05, CPU, m) {
  m.impl("sum_squares", sum_squares_cpu);
}

TORCH_LIBRARY_IMPL(exercise05, AutocastCPU, m) {
  m.impl("sum_squares", sum_squares_autocast);
}
