// A device of our own, on the PrivateUse1 dispatch key: its memory is host RAM, and to the dispatcher it is an
// accelerator like any other (lesson 09). What a tensor needs to exist on it and move (an allocator, aten's factory,
// copy and view kernels), four compute kernels, a kernel for one of the workbook's own operators, and one boxed
// fallback that serves every other operator on the CPU. Every kernel records itself with the trace recorder. What
// torch asks of a device outside the dispatcher (a device guard, the PrivateUse1 hooks) is in guard.cpp.
//
// TORCH_LIBRARY_IMPL(aten, <key>, m) blocks like these (generated, in their case) are how out-of-tree backends such
// as torch_xla and Ascend's torch_npu plug into PyTorch: the operators are aten's own; the backend brings kernels.
#include <ATen/EmptyTensor.h>
#include <ATen/TensorIterator.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/UnaryOps.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/abs_native.h>
#include <ATen/ops/add.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/resize_native.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/view_native.h>
#include <c10/core/Allocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <torch/library.h>

#include <atomic>
#include <cstring>

#include "trace.h"

namespace workbook::device {
namespace {

const c10::Device kDevice(c10::DeviceType::PrivateUse1, 0);

// ---- Memory: host RAM, each allocation and free counted (a leak shows as a difference) -------------------------

std::atomic<int64_t> allocations{0}, frees{0}, fallback_calls{0};

void host_free(void* data) {
  c10::free_cpu(data);
  ++frees;
}

struct HostAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t bytes) override {
    void* data = c10::alloc_cpu(bytes ? bytes : 1);  // one byte for an empty tensor: every DataPtr is freed once
    ++allocations;
    return {data, data, &host_free, kDevice};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &host_free; }
  void copy_data(void* dest, const void* src, std::size_t bytes) const override { std::memcpy(dest, src, bytes); }
};

HostAllocator allocator;
REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &allocator);

// ---- Kernels -------------------------------------------------------------------------------------------------------

// Our memory is host memory: a CPU tensor over the same bytes lets CPU code read and write it, with the same lazy
// conjugate and negative bits (options() carries neither). (A CPU tensor that got here is a 0-dim scalar, which
// check_on_device lets through: it is used as it is.)
at::Tensor on_cpu(const at::Tensor& tensor) {
  if (tensor.is_cpu()) return tensor;
  at::Tensor cpu =
      at::from_blob(tensor.data_ptr(), tensor.sizes(), tensor.strides(), tensor.options().device(c10::kCPU));
  cpu.unsafeGetTensorImpl()->_set_conj(tensor.is_conj());
  cpu.unsafeGetTensorImpl()->_set_neg(tensor.is_neg());
  return cpu;
}

// A CPU result, copied to a new tensor on our device, with the strides aten's CPU kernel chose for it.
at::Tensor to_device(const at::Tensor& cpu_result) {
  at::Tensor result =
      at::empty_strided(cpu_result.sizes(), cpu_result.strides(), cpu_result.options().device(kDevice));
  on_cpu(result).copy_(cpu_result);
  return result;
}

// A kernel registered with m.impl gets no device check from the dispatcher: without this one, a CPU argument would
// be read through on_cpu() and the call would silently succeed. A 0-dim CPU tensor is a scalar, accepted on any
// device (as CUDA's kernels accept it).
void check_on_device(const char* op, const char* name, const at::Tensor& tensor) {
  TORCH_CHECK(tensor.device().type() == c10::DeviceType::PrivateUse1 || (tensor.is_cpu() && tensor.dim() == 0), op, ": `", name, "` is on ", tensor.device(),
              "; every tensor argument must be on the same device (move it with .to(...))");
}

// Factory functions pass what they were asked for to these two kernels, and nothing else checks it: the device's
// index, a layout (a sparse or other non-strided one, which this allocator cannot hold), and pinned memory (page-locked
// host memory that a GPU copies from asynchronously: a property of CPU tensors, as torch's own kernels say).
void check_factory_options(std::optional<c10::Device> device, std::optional<c10::Layout> layout,
                           std::optional<bool> pin_memory) {
  TORCH_CHECK(!device || device->index() <= 0, "the workbook's device has one index, 0; got ", *device);
  TORCH_CHECK(c10::layout_or_default(layout) == c10::kStrided, "the workbook's device holds strided tensors only; got ",
              c10::layout_or_default(layout));
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory),
              "only CPU tensors can be pinned; the workbook's device got pin_memory=True");
}

at::Tensor empty_memory_format(c10::DispatchKeySet ks, c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory, std::optional<c10::MemoryFormat> memory_format) {
  trace::Scope scope("aten::empty.memory_format", ks);
  check_factory_options(device, layout, pin_memory);
  return at::detail::empty_generic(size, &allocator, c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                   c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(c10::DispatchKeySet ks, c10::IntArrayRef size, c10::IntArrayRef stride,
                         std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                         std::optional<c10::Device> device, std::optional<bool> pin_memory) {
  trace::Scope scope("aten::empty_strided", ks);
  check_factory_options(device, layout, pin_memory);
  return at::detail::empty_strided_generic(size, stride, &allocator,
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), c10::dtype_or_default(dtype));
}

// A copy with either side on our device, done by the CPU's copy_ (strides and dtype conversion included).
void copy_host(const at::Tensor& src, const at::Tensor& dst) {
  (dst.is_cpu() ? dst : on_cpu(dst)).copy_(src.is_cpu() ? src : on_cpu(src));
}

// x.to("workbook"), x.cpu() and copy_ all end here, with one side on our device.
at::Tensor copy_from(c10::DispatchKeySet ks, const at::Tensor& self, const at::Tensor& dst, bool /*non_blocking*/) {
  trace::Scope scope("aten::_copy_from", ks, self, dst);
  copy_host(self, dst);
  return dst;
}

// What the fallback uses to write an out= result back: the result may have a new shape.
at::Tensor copy_from_and_resize(c10::DispatchKeySet ks, const at::Tensor& self, const at::Tensor& dst) {
  trace::Scope scope("aten::_copy_from_and_resize", ks, self, dst);
  dst.resize_(self.sizes());
  copy_host(self, dst);
  return dst;
}

// x.item(), and printing.
c10::Scalar local_scalar_dense(c10::DispatchKeySet ks, const at::Tensor& self) {
  trace::Scope scope("aten::_local_scalar_dense", ks, self);
  return on_cpu(self).item();
}

// Views share the storage: these must not go through the fallback, which would return a copy.
at::Tensor as_strided(c10::DispatchKeySet ks, const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride,
                      std::optional<int64_t> storage_offset) {
  trace::Scope scope("aten::as_strided", ks, self);
  return at::native::as_strided_tensorimpl(self, size, stride, storage_offset);
}

at::Tensor view(c10::DispatchKeySet ks, const at::Tensor& self, c10::IntArrayRef size) {
  trace::Scope scope("aten::view", ks, self);
  return at::native::view(self, size);
}

// Grows the storage with the storage's own allocator (ours), keeping the data.
const at::Tensor& resize_(c10::DispatchKeySet ks, const at::Tensor& self, c10::IntArrayRef size,
                          std::optional<c10::MemoryFormat> memory_format) {
  trace::Scope scope("aten::resize_", ks, self);
  return at::native::resize_(self, size, memory_format);
}

at::Tensor& fill_(c10::DispatchKeySet ks, at::Tensor& self, const c10::Scalar& value) {
  trace::Scope scope("aten::fill_.Scalar", ks, self);
  on_cpu(self).fill_(value);
  return self;
}

at::Tensor add(c10::DispatchKeySet ks, const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha) {
  trace::Scope scope("aten::add.Tensor", ks, self, other);
  check_on_device("add", "self", self);
  check_on_device("add", "other", other);
  return to_device(at::add(on_cpu(self), on_cpu(other), alpha));
}

at::Tensor mul(c10::DispatchKeySet ks, const at::Tensor& self, const at::Tensor& other) {
  trace::Scope scope("aten::mul.Tensor", ks, self, other);
  check_on_device("mul", "self", self);
  check_on_device("mul", "other", other);
  return to_device(at::mul(on_cpu(self), on_cpu(other)));
}

at::Tensor mm(c10::DispatchKeySet ks, const at::Tensor& self, const at::Tensor& mat2) {
  trace::Scope scope("aten::mm", ks, self, mat2);
  check_on_device("mm", "self", self);
  check_on_device("mm", "mat2", mat2);
  return to_device(at::mm(on_cpu(self), on_cpu(mat2)));
}

at::Tensor sum(c10::DispatchKeySet ks, const at::Tensor& self, std::optional<c10::ScalarType> dtype) {
  trace::Scope scope("aten::sum", ks, self);
  return to_device(at::sum(on_cpu(self), dtype));
}

// ---- aten's own kernel, with a loop of ours: abs ---------------------------------------------------------------
// at::native::abs_out is aten's device-generic kernel for abs.out (CPU and CUDA register the same function): it checks
// the arguments, resizes `out` and sets up a TensorIterator (broadcasting, dtypes, strides, same device), then calls
// abs_stub for the iterator's device type. Registered at our key, it reaches our entry in that stub, set by
// REGISTER_PRIVATEUSE1_DISPATCH below: the loop is all a backend writes. A real device launches its own loop there;
// ours runs aten's CPU kernel on CPU views of the iterator's tensors, as the compute kernels above do.
void abs_loop(at::TensorIteratorBase& iter) {
  at::Tensor out = on_cpu(at::Tensor(iter.output()));  // a CPU view of our memory: the CPU kernel writes into it
  at::abs_out(out, on_cpu(at::Tensor(iter.input())));
}

at::Tensor& abs_out(c10::DispatchKeySet ks, const at::Tensor& self, at::Tensor& out) {
  trace::Scope scope("aten::abs.out", ks, self, out);
  return at::native::abs_out(self, out);
}

// ---- The boxed fallback: any other aten operator, run on the CPU ----------------------------------------------
// torch's cpu_fallback copies the tensor arguments to the CPU (through our _copy_from), calls the operator there,
// copies the results back to our device, and writes mutated arguments (in-place and out=) back into the originals.
// Before that, the device check the native kernels make: a CPU tensor among the arguments (other than a 0-dim one)
// is an error, not a silent copy.

void check_arguments_on_device(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  const auto& arguments = op.schema().arguments();
  for (size_t i = 0; i < arguments.size(); ++i) {
    const c10::IValue& value = stack[stack.size() - arguments.size() + i];
    std::vector<at::Tensor> tensors;
    if (value.isTensor()) {
      tensors.push_back(value.toTensor());
    } else if (value.isTensorList()) {
      for (const at::Tensor& tensor : value.toTensorList()) tensors.push_back(tensor);
    }
    for (const at::Tensor& tensor : tensors) {
      if (tensor.defined()) check_on_device(op.schema().name().c_str(), arguments[i].name().c_str(), tensor);
    }
  }
}

void fallback(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  const std::string& overload = op.schema().overload_name();
  const std::string name = op.schema().name() + (overload.empty() ? "" : "." + overload);  // as the kernels record
  trace::Scope scope(name.c_str(), ks);
  check_arguments_on_device(op, *stack);
  ++fallback_calls;
  at::native::cpu_fallback(op, stack);
}

// ---- The workbook's own operators on our device ------------------------------------------------------------------
// A kernel per operator and key, as for aten's. Without one, workbook::add on our device is served by the fallback
// above (a fallback serves every namespace). Our memory is host memory, so the workbook's CPU kernel (csrc/cpu.cpp)
// runs on it as it stands: called with CPU views of the arguments, it reaches the CPU key; its result is copied here.

at::Tensor workbook_add(c10::DispatchKeySet ks, const at::Tensor& self, const at::Tensor& other) {
  trace::Scope scope("add", ks, self, other);
  check_on_device("workbook::add", "self", self);
  check_on_device("workbook::add", "other", other);
  static const auto add_op = c10::Dispatcher::singleton()
                                 .findSchemaOrThrow("workbook::add", "")
                                 .typed<at::Tensor(const at::Tensor&, const at::Tensor&)>();
  return to_device(add_op.call(on_cpu(self), on_cpu(other)));
}

}  // namespace
}  // namespace workbook::device

// The stub's entry for PrivateUse1. The macro names the stub without a namespace: it is written in aten's.
namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(abs_stub, &workbook::device::abs_loop)
}  // namespace at::native

namespace workbook::device {

TORCH_LIBRARY_IMPL(workbook, PrivateUse1, m) {
  m.impl("add", workbook_add);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("empty_strided", empty_strided);
  m.impl("_copy_from", copy_from);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
  m.impl("_local_scalar_dense", local_scalar_dense);
  m.impl("as_strided", as_strided);
  m.impl("view", view);
  m.impl("resize_", resize_);
  m.impl("fill_.Scalar", fill_);
  m.impl("add.Tensor", add);
  m.impl("mul.Tensor", mul);
  m.impl("mm", mm);
  m.impl("sum", sum);
  m.impl("abs.out", abs_out);  // aten's kernel, our loop (abs_stub)
}

// A copy from a conjugate or negative view: torch's fallback for those keys would first resolve the view by cloning
// it, a copy that comes back here, and again, until the stack overflows. Our copy takes the bits as they are (on_cpu
// keeps them, and the CPU's copy_ resolves them), so the call goes straight on to it.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&fallback>());
}

// The counts, for Python: allocations, frees, and calls the fallback served.
TORCH_LIBRARY(workbook_device, m) {
  m.def("counts() -> int[]", []() -> std::vector<int64_t> { return {allocations, frees, fallback_calls}; });
}

}  // namespace workbook::device
