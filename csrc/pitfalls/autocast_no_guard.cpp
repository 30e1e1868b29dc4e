// Lesson 05's pitfall: csrc/autocast.cpp's matmul without the ExcludeDispatchKeyGuard.
//
// The call inside the kernel is dispatched like any other. AutocastCPU is still on, so it comes
// back to this kernel, which casts (now a no-op: the inputs are already bfloat16) and calls again,
// and again, until the stack overflows and the process dies.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

#include "ops.h"

namespace {

at::Tensor matmul_autocast(const at::Tensor& self, const at::Tensor& other) {
  // Missing: c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCPU);
  const c10::ScalarType lower = at::autocast::get_autocast_dtype(c10::DeviceType::CPU);
  return workbook::ops::matmul(at::autocast::cached_cast(lower, self, c10::DeviceType::CPU),
                               at::autocast::cached_cast(lower, other, c10::DeviceType::CPU));
}

}  // namespace

TORCH_LIBRARY_IMPL(workbook, AutocastCPU, m) {
  m.impl("matmul", &matmul_autocast);
}
