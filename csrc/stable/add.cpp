// workbook_stable::add: workbook::add (cpu.cpp) ported to LibTorch's *stable ABI*.
//
// What the stable ABI buys. cpu.cpp uses ATen's C++ classes (at::Tensor, c10::Error, the
// dispatcher's templates); their memory layout and mangled names change between torch releases,
// so that .so must be rebuilt for every torch version. This file includes only
// torch/csrc/stable/* and torch/headeronly/*: header-only C++ wrappers over a C API (the "shim":
// aoti_torch_* and torch_* functions) that torch promises to keep. Built once, the library goes on
// loading and working with later torch releases, no rebuild per release. (`nm -D` on the built .so
// shows it imports only extern "C" aoti_torch_* / torch_* functions from torch, no C++ symbols.)
//
// TORCH_TARGET_VERSION (defined below, before any torch header; or -D on the command line) does two
// things: the stable headers hide every API newer than that version (2.10 here), so the .so only
// calls what 2.10 already had and runs on 2.10 and later; and every non-stable torch header (ATen/,
// c10/, torch/library.h) turns into an #error, so an accidental #include of ATen fails the build
// instead of silently tying the library to this torch. (TORCH_STABLE_ONLY gives only the #error.)
//
// Limits hit in this port (the 2.10 API, built with torch 2.13, 2.14 and 2.15):
// - A stable kernel is a boxed function of its schema's arguments only: no DispatchKeySet, so no
//   trace::Scope (trace.h is ATen code), and no way to redispatch.
// - at::vec::Vectorized and at::parallel_reduce are not stable: a plain loop (-O3 auto-vectorizes
//   it) split over threads by torch::stable::parallel_for.
// - headeronly prints ScalarType, but has no operator<< for shapes, devices or layouts: the two
//   helpers below print them.
// - STD_TORCH_CHECK (the stable TORCH_CHECK) puts "function, /path/file.cpp:line, " before every
//   message ("check_cpu, /path/to/add.cpp:70, workbook_stable::add: ..."), so
//   WORKBOOK_CHECK below throws the bare message instead, as TORCH_CHECK shows it.
// - Only a CPU kernel here. Without a Meta/fake kernel, meta tensors, torch.compile and opcheck's
//   fake-tensor tests fail; add one from Python with torch.library.register_fake (a stable C++
//   kernel at the Meta key would also do). The stable API has no autograd::Function: a backward
//   formula must come from Python (torch.library.register_autograd).
// - A second library: STABLE_TORCH_LIBRARY(workbook, ...) would clash with schemas.cpp's
//   TORCH_LIBRARY(workbook, ...), so the stable op lives in namespace workbook_stable.
#define TORCH_TARGET_VERSION 0x020A000000000000  // torch 2.10: major, minor, patch, then zeros

#include <torch/csrc/stable/library.h>          // STABLE_TORCH_LIBRARY(_IMPL), TORCH_BOX
#include <torch/csrc/stable/ops.h>              // contiguous, new_empty, parallel_for
#include <torch/csrc/stable/tensor.h>           // torch::stable::Tensor
#include <torch/headeronly/core/Dispatch_v2.h>  // THO_DISPATCH_V2: the stable AT_DISPATCH_V2

#include <sstream>
#include <stdexcept>
#include <string>

namespace workbook_stable {
namespace {

using torch::headeronly::ScalarType;
using torch::stable::Tensor;

constexpr const char* kOp = "workbook_stable::add";
constexpr int64_t kGrain = 32768;  // elements per parallel task, as in cpu.cpp

// A kernel that throws std::runtime_error raises RuntimeError in Python: no c10::Error needed.
template <typename... Args>
[[noreturn]] void fail(const Args&... args) {
  std::ostringstream msg;
  (msg << ... << args);
  throw std::runtime_error(msg.str());
}
// A macro, so the message (device_str, shape_str) is only built when the check fails.
#define WORKBOOK_CHECK(cond, ...)   \
  do {                              \
    if (!(cond)) fail(__VA_ARGS__); \
  } while (0)

// "[2, 3]", as at::IntArrayRef prints.
std::string shape_str(torch::headeronly::IntHeaderOnlyArrayRef sizes) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s + "]";
}

// "cpu", "meta", "cuda:0", as c10::Device prints (the common device types only).
std::string device_str(const torch::stable::Device& d) {
  using torch::headeronly::DeviceType;
  std::string s;
  switch (d.type()) {
    case DeviceType::CPU: s = "cpu"; break;
    case DeviceType::CUDA: s = "cuda"; break;
    case DeviceType::Meta: s = "meta"; break;
    case DeviceType::MPS: s = "mps"; break;
    case DeviceType::XPU: s = "xpu"; break;
    default: s = "device type " + std::to_string(static_cast<int>(d.type()));
  }
  return d.has_index() ? s + ":" + std::to_string(d.index()) : s;
}

// The checks of checks.h, in the same words. The dispatcher sends a meta (or cuda) tensor to that
// backend's kernel, not here, so check_cpu only fires when this kernel is called directly.
void check_cpu(const char* arg, const Tensor& t) {
  WORKBOOK_CHECK(t.is_cpu(), kOp, ": `", arg, "` must be on cpu, got ", device_str(t.device()));
}

void check_strided(const char* arg, const Tensor& t) {
  WORKBOOK_CHECK(t.layout() == torch::headeronly::kStrided, kOp, ": `", arg, "` must be a dense (strided) tensor");
}

void check_dtype(const char* arg, const Tensor& t) {
  const ScalarType s = t.scalar_type();
  const bool ok = s == ScalarType::Float || s == ScalarType::Double || s == ScalarType::Int || s == ScalarType::Long ||
                  s == ScalarType::BFloat16 || s == ScalarType::Half;
  WORKBOOK_CHECK(ok, kOp, ": `", arg, "` has dtype ", s, "; supported: Float, Double, Int, Long, BFloat16, Half");
}

// out = a + b elementwise, all contiguous. For BFloat16 and Half, headeronly's operator+ adds in
// float and rounds once, as torch.add does.
template <typename T>
void add_into(const Tensor& a, const Tensor& b, const Tensor& out) {
  const T* pa = a.const_data_ptr<T>();
  const T* pb = b.const_data_ptr<T>();
  T* po = out.mutable_data_ptr<T>();
  torch::stable::parallel_for(0, a.numel(), kGrain, [=](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) po[i] = pa[i] + pb[i];
  });
}

Tensor add(const Tensor& self, const Tensor& other) {
  check_cpu("self", self);
  check_cpu("other", other);
  check_strided("self", self);
  check_strided("other", other);
  check_dtype("self", self);
  WORKBOOK_CHECK(other.scalar_type() == self.scalar_type(), kOp, ": `other` has dtype ", other.scalar_type(),
                 " but `self` has dtype ", self.scalar_type(), "; they must match");
  WORKBOOK_CHECK(other.sizes() == self.sizes(), kOp, ": `other` has shape ", shape_str(other.sizes()),
                 " but `self` has shape ", shape_str(self.sizes()), "; they must match (no broadcasting)");
  // The loop reads memory in order, so a transposed or sliced input is first copied into a
  // contiguous one (aten::contiguous through the dispatcher; no copy when already contiguous).
  const Tensor a = torch::stable::contiguous(self);
  const Tensor b = torch::stable::contiguous(other);
  Tensor out = torch::stable::new_empty(a, a.sizes());  // contiguous, a's dtype and device
  THO_DISPATCH_V2(a.scalar_type(), kOp, AT_WRAP([&] { add_into<scalar_t>(a, b, out); }), ScalarType::Float,
                  ScalarType::Double, ScalarType::Int, ScalarType::Long, ScalarType::BFloat16, ScalarType::Half);
  return out;
}

}  // namespace
}  // namespace workbook_stable

// One STABLE_TORCH_LIBRARY per namespace, like TORCH_LIBRARY; kernels via _IMPL. TORCH_BOX wraps
// the typed function into the boxed form the C API takes (a stack of StableIValues).
STABLE_TORCH_LIBRARY(workbook_stable, m) {
  m.def("add(Tensor self, Tensor other) -> Tensor");
}

STABLE_TORCH_LIBRARY_IMPL(workbook_stable, CPU, m) {
  m.impl("add", TORCH_BOX(&workbook_stable::add));
}
