// CUDA kernels, registered at the CUDA dispatch key: the same operators, semantics, dtypes and
// argument checks as cpu.cpp, run on the GPU. Each kernel takes the DispatchKeySet first (the
// dispatcher passes it; the schema does not mention it) so it can record its trace event.
// Inputs that are not contiguous are made contiguous; tensors written in place must already be.
// The argument checks are checks.h's, shared with cpu.cpp, plus one of this file's: inputs on
// the same GPU.
//
// Two design points:
// - sum reduces within each block first (a grid-stride loop per thread, then __shfl_down_sync
//   inside each warp, then shared memory across the block's warps) and issues ONE atomicAdd per
//   block. The naive one-atomic-per-element (or per-thread) version serializes millions of
//   atomics on a single address; here there are only as many atomics as blocks (a few per SM).
// - Every launch, and the memset that zeroes sum's output, runs on the *current* stream
//   (c10::cuda::getCurrentCUDAStream()), never the legacy default stream. PyTorch orders its own
//   work on the current stream; a kernel on another stream is not ordered with it. The tutorial
//   op that used the default stream gave silently wrong results under
//   torch.compile(mode="reduce-overhead"), which captures CUDA graphs on a side stream
//   (pytorch#157363).
//
// This file needs a CUDA build of torch and a GPU to run (helpers/build.py's "cuda" layer);
// tests/test_cuda.py compile-checks it with nvcc even where neither is available.
#include <ATen/Context.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>
#include <torch/library.h>

#include <algorithm>
#include <type_traits>

#include "checks.h"
#include "trace.h"

namespace workbook {
namespace {

constexpr auto kCUDA = c10::DeviceType::CUDA;

constexpr int kThreads = 256;  // threads per block for add and sum
constexpr int kWarpSize = 32;
constexpr int kWarps = kThreads / kWarpSize;
constexpr int kTile = 16;  // matmul tile: kTile x kTile threads per block, two kTile x kTile tiles in shared memory

// The four dtypes sum takes. AT_DISPATCH_ALL_TYPES would also instantiate every kernel
// for uint8, int8 and int16: dead code that costs compile time.
#define WORKBOOK_DISPATCH_TYPES(TYPE, NAME, ...)                  \
  AT_DISPATCH_SWITCH(TYPE, NAME,                                   \
                     AT_DISPATCH_CASE(at::kFloat, __VA_ARGS__)     \
                     AT_DISPATCH_CASE(at::kDouble, __VA_ARGS__)    \
                     AT_DISPATCH_CASE(at::kInt, __VA_ARGS__)       \
                     AT_DISPATCH_CASE(at::kLong, __VA_ARGS__))

// add also takes the two dtypes autocast casts to (lesson 05).
#define WORKBOOK_DISPATCH_ADD_TYPES(TYPE, NAME, ...)               \
  AT_DISPATCH_SWITCH(TYPE, NAME,                                   \
                     AT_DISPATCH_CASE(at::kFloat, __VA_ARGS__)     \
                     AT_DISPATCH_CASE(at::kDouble, __VA_ARGS__)    \
                     AT_DISPATCH_CASE(at::kInt, __VA_ARGS__)       \
                     AT_DISPATCH_CASE(at::kLong, __VA_ARGS__)      \
                     AT_DISPATCH_CASE(at::kHalf, __VA_ARGS__)      \
                     AT_DISPATCH_CASE(at::kBFloat16, __VA_ARGS__))

// check_device says each tensor is on CUDA; this says they are on the *same* GPU.
void check_same_device(const char* op, const char* arg, const at::Tensor& t, const char* ref_arg, const at::Tensor& ref) {
  TORCH_CHECK(t.device() == ref.device(), op, ": `", arg, "` is on ", t.device(), " but `", ref_arg, "` is on ",
              ref.device(), "; they must be on the same device");
}

void check_add_devices(const char* op, const char* first_arg, const at::Tensor& first, const at::Tensor& other) {
  check_device(op, first_arg, first, kCUDA);
  check_device(op, "other", other, kCUDA);
  check_same_device(op, "other", other, first_arg, first);
}

// Enough blocks to fill the GPU for a grid-stride loop, no more than the work needs.
int grid_size(int64_t n, int device) {
  int sms = 0;
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int64_t needed = (n + kThreads - 1) / kThreads;
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(needed, int64_t{sms} * 4)));
}

// ---- add ----------------------------------------------------------------------------------

template <typename scalar_t>
__global__ void add_kernel(const scalar_t* a, const scalar_t* b, scalar_t* out, int64_t n) {
  const int64_t stride = int64_t{blockDim.x} * gridDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = a[i] + b[i];
}

// out = a + b, elementwise; all three the same shape, dtype and device, a and b contiguous.
void add_into(const at::Tensor& a, const at::Tensor& b, const at::Tensor& out) {
  const int64_t n = a.numel();
  if (n == 0) return;  // a grid of 0 blocks is an invalid launch
  const int blocks = grid_size(n, a.get_device());
  const auto stream = c10::cuda::getCurrentCUDAStream();
  WORKBOOK_DISPATCH_ADD_TYPES(a.scalar_type(), "workbook::add", [&] {
    add_kernel<scalar_t><<<blocks, kThreads, 0, stream>>>(a.const_data_ptr<scalar_t>(), b.const_data_ptr<scalar_t>(),
                                                           out.mutable_data_ptr<scalar_t>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

at::Tensor add(c10::DispatchKeySet ks, const at::Tensor& self, const at::Tensor& other) {
  trace::Scope scope("add", ks, self, other);
  check_add_devices("workbook::add", "self", self, other);
  check_add_inputs("workbook::add", "self", self, other);
  const c10::cuda::CUDAGuard guard(self.device());
  at::Tensor out = at::empty(self.sizes(), self.options());
  add_into(self.contiguous(), other.contiguous(), out);
  return out;
}

at::Tensor& add_(c10::DispatchKeySet ks, at::Tensor& x, const at::Tensor& other) {
  trace::Scope scope("add_", ks, x, other);
  check_add_devices("workbook::add_", "x", x, other);
  check_add_inputs("workbook::add_", "x", x, other);
  check_writable("workbook::add_", "x", x);
  const c10::cuda::CUDAGuard guard(x.device());
  add_into(x, other.contiguous(), x);
  return x;
}

at::Tensor& add_out(c10::DispatchKeySet ks, const at::Tensor& x, const at::Tensor& other, at::Tensor& out) {
  trace::Scope scope("add_out", ks, x, other, out);
  constexpr const char* op = "workbook::add_out";
  check_add_devices(op, "x", x, other);
  check_device(op, "out", out, kCUDA);
  check_same_device(op, "out", out, "x", x);
  check_add_inputs(op, "x", x, other);
  check_add_out(op, out, x);
  const c10::cuda::CUDAGuard guard(x.device());
  add_into(x.contiguous(), other.contiguous(), out);
  return out;
}

// ---- sum ----------------------------------------------------------------------------------

// The accumulator depends on the input, as in cpu.cpp: int64 for integer inputs (int32 and int64,
// as torch.sum), the input's own type for float and double. The total is converted to the result
// dtype once, at the end (so an int32 result wraps modulo 2^32 like the CPU kernel's). Unlike
// cpu.cpp, which adds its float lanes' block totals in double, float32 accumulates in float32
// throughout: per-thread partial sums combined in a tree keep the rounding error small (about
// log2(n) roundings deep, not n), and a float atomicAdd is native where a double one is slow on
// many GPUs. The blocks' atomics land in
// any order, so a floating-point sum may differ in its last bits from run to run; integers are exact.
template <typename in_t>
using sum_acc_t = std::conditional_t<std::is_integral_v<in_t>, int64_t, in_t>;

__device__ __forceinline__ void atomic_add(float* address, float value) { atomicAdd(address, value); }
__device__ __forceinline__ void atomic_add(double* address, double value) { atomicAdd(address, value); }
__device__ __forceinline__ void atomic_add(int64_t* address, int64_t value) {
  // No signed 64-bit atomicAdd; unsigned addition is the same bits in two's complement.
  static_assert(sizeof(int64_t) == sizeof(unsigned long long));
  atomicAdd(reinterpret_cast<unsigned long long*>(address), static_cast<unsigned long long>(value));
}

template <typename in_t, typename acc_t>
__global__ void sum_kernel(const in_t* input, int64_t n, acc_t* total) {
  __shared__ acc_t warp_sums[kWarps];

  // 1. Each thread sums a grid-stride slice of the input in a register.
  acc_t value = 0;
  const int64_t stride = int64_t{blockDim.x} * gridDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) value += static_cast<acc_t>(input[i]);

  // 2. Each warp sums its 32 values with register shuffles: lane 0 ends up with the warp's sum.
  //    Every thread of the block reaches here (no early return), so the full mask is right.
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) value += __shfl_down_sync(0xffffffffu, value, offset);

  // 3. Lane 0 of each warp parks its sum in shared memory; the first warp sums those.
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  if (lane == 0) warp_sums[warp] = value;
  __syncthreads();
  if (warp == 0) {
    value = lane < kWarps ? warp_sums[lane] : acc_t{0};
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2) value += __shfl_down_sync(0xffffffffu, value, offset);
    // 4. One atomic per block.
    if (lane == 0) atomic_add(total, value);
  }
}

// The sum of every element of `self` as a 0-dim tensor of `result_dtype`; inputs already checked.
at::Tensor sum_all(const at::Tensor& self, c10::ScalarType result_dtype) {
  constexpr const char* op = "workbook::sum";
  const c10::cuda::CUDAGuard guard(self.device());
  const auto stream = c10::cuda::getCurrentCUDAStream();
  // Float atomics add in whatever order the blocks finish: not bitwise reproducible. Say so, like
  // torch's own atomic kernels, so that torch.use_deterministic_algorithms(True) raises here.
  if (at::isFloatingType(self.scalar_type())) at::globalContext().alertNotDeterministic(op);
  const at::Tensor input = self.contiguous();
  const int64_t n = input.numel();
  at::Tensor total;
  WORKBOOK_DISPATCH_TYPES(input.scalar_type(), op, [&] {
    using in_t = scalar_t;
    using acc_t = sum_acc_t<in_t>;
    total = at::empty({}, self.options().dtype(c10::CppTypeToScalarType<acc_t>::value));
    // The kernel adds into the total, so it starts at zero: on the stream the kernel runs on.
    C10_CUDA_CHECK(cudaMemsetAsync(total.mutable_data_ptr<acc_t>(), 0, sizeof(acc_t), stream));
    if (n == 0) return;  // a grid of 0 blocks is an invalid launch
    sum_kernel<in_t, acc_t><<<grid_size(n, self.get_device()), kThreads, 0, stream>>>(input.const_data_ptr<in_t>(), n,
                                                                                      total.mutable_data_ptr<acc_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return total.scalar_type() == result_dtype ? total : total.to(result_dtype);
}

at::Tensor sum(c10::DispatchKeySet ks, const at::Tensor& self, std::optional<c10::ScalarType> dtype) {
  trace::Scope scope("sum", ks, self);
  check_device("workbook::sum", "self", self, kCUDA);
  return sum_all(self, check_sum_inputs("workbook::sum", self, dtype));
}

at::Tensor all_reduce(c10::DispatchKeySet ks, const at::Tensor& self) {
  trace::Scope scope("all_reduce", ks, self);
  check_device("workbook::all_reduce", "self", self, kCUDA);
  check_all_reduce_inputs("workbook::all_reduce", self);
  return sum_all(self, at::kLong);
}

// ---- matmul -------------------------------------------------------------------------------

// out[n, m] = a[n, k] @ b[k, m], all row-major contiguous. Each block computes one
// kTile x kTile tile of `out`, one element per thread. It walks k in steps of kTile: the block
// loads a tile of `a` and a tile of `b` into shared memory (each thread one element of each,
// zero past the edges), then every thread reads kTile values of each from shared memory
// instead of global memory. Each global element is thus read n/kTile or m/kTile times, not n or m.
// half and bfloat16 inputs are widened to float as they are loaded (at::opmath_type), so the sum
// is kept, and rounded once, in float.
template <typename scalar_t>
__global__ void matmul_kernel(const scalar_t* a, const scalar_t* b, scalar_t* out, int64_t n, int64_t k, int64_t m) {
  using acc_t = at::opmath_type<scalar_t>;
  __shared__ acc_t a_tile[kTile][kTile];
  __shared__ acc_t b_tile[kTile][kTile];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t row = int64_t{blockIdx.y} * kTile + ty;  // of out and a
  const int64_t col = int64_t{blockIdx.x} * kTile + tx;  // of out and b
  acc_t acc = 0;
  for (int64_t t = 0; t < k; t += kTile) {
    // tx walks a's columns and b's columns, so consecutive threads read consecutive addresses.
    a_tile[ty][tx] = (row < n && t + tx < k) ? static_cast<acc_t>(a[row * k + t + tx]) : acc_t{0};
    b_tile[ty][tx] = (t + ty < k && col < m) ? static_cast<acc_t>(b[(t + ty) * m + col]) : acc_t{0};
    __syncthreads();
#pragma unroll
    for (int p = 0; p < kTile; ++p) acc += a_tile[ty][p] * b_tile[p][tx];
    __syncthreads();  // before the next iteration overwrites the tiles
  }
  if (row < n && col < m) out[row * m + col] = static_cast<scalar_t>(acc);
}

at::Tensor matmul(c10::DispatchKeySet ks, const at::Tensor& self, const at::Tensor& other) {
  trace::Scope scope("matmul", ks, self, other);
  constexpr const char* op = "workbook::matmul";
  check_device(op, "self", self, kCUDA);
  check_device(op, "other", other, kCUDA);
  check_same_device(op, "other", other, "self", self);
  check_matmul_inputs(op, self, other);
  const int64_t n = self.size(0), k = self.size(1), m = other.size(1);
  // gridDim.y is at most 65535 (gridDim.x allows 2^31 - 1).
  TORCH_CHECK((n + kTile - 1) / kTile <= 65535, op, ": `self` has ", n, " rows; at most ", int64_t{65535} * kTile,
              " are supported");
  const c10::cuda::CUDAGuard guard(self.device());
  const at::Tensor a = self.contiguous(), b = other.contiguous();
  at::Tensor out = at::empty({n, m}, self.options());
  if (n == 0 || m == 0) return out;  // a grid of 0 blocks is an invalid launch; k == 0 gives zeros below
  const dim3 threads(kTile, kTile);
  const dim3 blocks(static_cast<unsigned>((m + kTile - 1) / kTile), static_cast<unsigned>((n + kTile - 1) / kTile));
  const auto stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, a.scalar_type(), op, [&] {
    matmul_kernel<scalar_t><<<blocks, threads, 0, stream>>>(a.const_data_ptr<scalar_t>(), b.const_data_ptr<scalar_t>(),
                                                             out.mutable_data_ptr<scalar_t>(), n, k, m);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(workbook, CUDA, m) {
  m.impl("add", &add);
  m.impl("add_", &add_);
  m.impl("add_out", &add_out);
  m.impl("sum", &sum);
  m.impl("all_reduce", &all_reduce);
  m.impl("matmul", &matmul);
}

}  // namespace workbook
