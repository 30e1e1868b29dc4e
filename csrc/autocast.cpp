// Autocast kernels: what `torch.autocast` does to the workbook's operators.
//
// Autocast has its own dispatch keys (AutocastCPU, AutocastCUDA, ...), above Autograd. They are in
// the thread-local *exclude* set until a `torch.autocast(device)` region removes theirs, so these
// kernels run only inside such a region. Each one picks a dtype, casts the inputs with
// at::autocast::cached_cast, and calls the operator again below its own key:
//
// - matmul, "lower precision" policy (torch's own for mm, linear, conv): float32 inputs are cast
//   to the region's lower-precision dtype, bfloat16 on CPU and float16 on CUDA by default.
// - add, "widest type" policy (torch's for cat, stack, addcdiv): inputs of mixed floating types
//   run in the widest of them (at::autocast::promote_type), so a bfloat16 activation plus a float32
//   bias is computed in float32, and nothing is rounded down.
//
// cached_cast only casts eligible tensors: floating point, on the region's device, not float64.
// It caches the cast of a float32 leaf that requires grad (a weight) until the region ends.
//
// The header is heavy: ATen/autocast_mode.h includes ATen/ATen.h and NativeFunctions.h (the
// declarations of every native function), which is why these kernels are a layer of their own
// (its compile time: python -m bench.build_times 05_autocast).
#include <ATen/autocast_mode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>

#include "ops.h"
#include "trace.h"

namespace workbook {
namespace {

// The same code serves both devices: `device` picks the autocast key to leave and the dtype.
template <c10::DeviceType device>
at::Tensor matmul(c10::DispatchKeySet ks, const at::Tensor& self, const at::Tensor& other) {
  trace::Scope scope("matmul", ks, self, other);
  // Turn this autocast key off for every call made inside this kernel: ops::matmul then
  // dispatches to the next key down (Autograd) instead of coming back here forever.
  c10::impl::ExcludeDispatchKeyGuard no_autocast(at::autocast::get_autocast_dispatch_key_from_device_type(device));
  const c10::ScalarType lower = at::autocast::get_autocast_dtype(device);
  return ops::matmul(at::autocast::cached_cast(lower, self, device), at::autocast::cached_cast(lower, other, device));
}

template <c10::DeviceType device>
at::Tensor add(c10::DispatchKeySet ks, const at::Tensor& self, const at::Tensor& other) {
  trace::Scope scope("add", ks, self, other);
  c10::impl::ExcludeDispatchKeyGuard no_autocast(at::autocast::get_autocast_dispatch_key_from_device_type(device));
  // Start from the lower-precision dtype and widen to float32 if any eligible input is float32.
  const c10::ScalarType widest =
      at::autocast::promote_type(at::autocast::get_autocast_dtype(device), device, self, other);
  return ops::add(at::autocast::cached_cast(widest, self, device), at::autocast::cached_cast(widest, other, device));
}

}  // namespace

TORCH_LIBRARY_IMPL(workbook, AutocastCPU, m) {
  m.impl("add", &add<c10::DeviceType::CPU>);
  m.impl("matmul", &matmul<c10::DeviceType::CPU>);
}

// Registering for CUDA needs no CUDA code, so a CPU-only build registers it too (and the dispatch
// table shows it); it runs only for CUDA tensors inside torch.autocast("cuda").
TORCH_LIBRARY_IMPL(workbook, AutocastCUDA, m) {
  m.impl("add", &add<c10::DeviceType::CUDA>);
  m.impl("matmul", &matmul<c10::DeviceType::CUDA>);
}

}  // namespace workbook
