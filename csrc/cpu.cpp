// CPU kernels, registered at the CPU dispatch key. Each kernel takes the DispatchKeySet first
// (the dispatcher passes it; the schema does not mention it) so it can record its trace event.
// Inputs that are not contiguous are made contiguous; tensors written in place must already be.
//
// Speed: the loops use at::vec::Vectorized<T>, ATen's portable SIMD type. Its width is fixed when
// this file is compiled: helpers/toolchain.py picks the flags for the instruction set torch itself chose on
// this machine (torch.backends.cpu.get_cpu_capability(): AVX512, AVX2, or DEFAULT, which is NEON
// on Arm), the way torch compiles its own kernels once per capability. at::parallel_for and
// at::parallel_reduce spread the work over cores where OpenMP is available (see toolchain.py).
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "checks.h"
#include "trace.h"

namespace workbook {
namespace {

constexpr auto kCPU = c10::DeviceType::CPU;
// Elements per parallel task: below this, starting a thread costs more than the work (ATen uses 32768).
constexpr int64_t kGrain = 32768;

// out = a + b, elementwise; all three the same shape and dtype, a and b contiguous.
// at::vec::map2 walks the arrays one Vectorized<scalar_t> at a time (8 floats with AVX2, 16 with
// AVX-512, 4 with Arm NEON) and finishes the tail with a partial load. For bfloat16 and float16 it
// adds in float and rounds the result once, as torch.add does.
void add_into(const at::Tensor& a, const at::Tensor& b, const at::Tensor& out) {
  AT_DISPATCH_ALL_TYPES_AND2(at::kBFloat16, at::kHalf, a.scalar_type(), "workbook::add", [&] {
    using Vec = at::vec::Vectorized<scalar_t>;
    const scalar_t* pa = a.const_data_ptr<scalar_t>();
    const scalar_t* pb = b.const_data_ptr<scalar_t>();
    scalar_t* po = out.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, a.numel(), kGrain, [&](int64_t begin, int64_t end) {
      at::vec::map2([](Vec x, Vec y) { return x + y; }, po + begin, pa + begin, pb + begin, end - begin);
    });
  });
}

at::Tensor add(c10::DispatchKeySet ks, const at::Tensor& self, const at::Tensor& other) {
  trace::Scope scope("add", ks, self, other);
  check_device("workbook::add", "self", self, kCPU);
  check_device("workbook::add", "other", other, kCPU);
  check_add_inputs("workbook::add", "self", self, other);
  at::Tensor out = at::empty(self.sizes(), self.options());
  add_into(self.contiguous(), other.contiguous(), out);
  return out;
}

at::Tensor& add_(c10::DispatchKeySet ks, at::Tensor& x, const at::Tensor& other) {
  trace::Scope scope("add_", ks, x, other);
  check_device("workbook::add_", "x", x, kCPU);
  check_device("workbook::add_", "other", other, kCPU);
  check_add_inputs("workbook::add_", "x", x, other);
  check_writable("workbook::add_", "x", x);
  add_into(x, other.contiguous(), x);
  return x;
}

at::Tensor& add_out(c10::DispatchKeySet ks, const at::Tensor& x, const at::Tensor& other, at::Tensor& out) {
  trace::Scope scope("add_out", ks, x, other, out);
  check_device("workbook::add_out", "x", x, kCPU);
  check_device("workbook::add_out", "other", other, kCPU);
  check_device("workbook::add_out", "out", out, kCPU);
  check_add_inputs("workbook::add_out", "x", x, other);
  check_add_out("workbook::add_out", out, x);
  add_into(x.contiguous(), other.contiguous(), out);
  return out;
}

// How many vector accumulators the floating-point sum keeps. A single running total is a chain of dependent adds,
// each waiting for the last (about 4 cycles); independent accumulators keep several adds in flight.
// 4 fit in 16 vector registers (AVX2) with room for the loads, as well as in 32 (AVX-512, NEON).
constexpr int kAccumulators = 4;

// Floating point: kAccumulators Vectorized<T> running sums over blocks of kBlock elements, each
// block's total added in double. Float addition is not associative, so the compiler may not
// split one running total into vectors by itself: Vectorized says it explicitly. A lane adds
// only kBlock / (kAccumulators * Vec::size()) values before its total moves to double, so rounding
// error stays below what a float32 result can show.
template <typename T>
double sum_floating(const T* p, int64_t n) {
  using Vec = at::vec::Vectorized<T>;
  constexpr int64_t kStep = kAccumulators * Vec::size();
  constexpr int64_t kBlock = 16384;
  double total = 0;
  for (int64_t start = 0; start < n; start += kBlock) {
    const int64_t end = std::min(n, start + kBlock);
    Vec acc[kAccumulators];
    for (auto& a : acc) a = Vec(T(0));
    int64_t i = start;
    for (; i + kStep <= end; i += kStep) {
      for (int j = 0; j < kAccumulators; ++j) acc[j] += Vec::loadu(p + i + j * Vec::size());
    }
    for (int j = 1; j < kAccumulators; ++j) acc[0] += acc[j];
    total += at::vec::vec_reduce_all<T>([](Vec x, Vec y) { return x + y; }, acc[0]);
    for (; i < end; ++i) total += p[i];
  }
  return total;
}

// Integers: int64 accumulators (torch.sum's accumulator type). An int32 vector is widened into two
// int64 vectors by at::vec::convert (vpmovsxdq with AVX2 and AVX-512). Spelled out rather than left
// to the compiler: g++ vectorizes a plain widening loop, clang 14 does not (4x slower).
template <typename T>
int64_t sum_integral(const T* p, int64_t n) {
  using Vec = at::vec::Vectorized<T>;
  using Vec64 = at::vec::Vectorized<int64_t>;
  Vec64 acc[2] = {Vec64(0), Vec64(0)};
  int64_t i = 0;
  for (; i + Vec::size() <= n; i += Vec::size()) {
    if constexpr (std::is_same_v<T, int64_t>) {
      acc[0] += Vec::loadu(p + i);
    } else {
      const auto wide = at::vec::convert<int64_t, 2, T, 1>(at::vec::VectorizedN<T, 1>(Vec::loadu(p + i)));
      acc[0] += wide[0];
      acc[1] += wide[1];
    }
  }
  int64_t total = at::vec::vec_reduce_all<int64_t>([](Vec64 x, Vec64 y) { return x + y; }, acc[0] + acc[1]);
  for (; i < n; ++i) total += p[i];
  return total;
}

template <typename in_t>
using sum_acc_t = std::conditional_t<std::is_integral_v<in_t>, int64_t, double>;

template <typename in_t>
sum_acc_t<in_t> sum_contiguous(const in_t* p, int64_t n) {
  if constexpr (std::is_integral_v<in_t>) {
    return sum_integral(p, n);
  } else {
    return sum_floating(p, n);
  }
}

// The sum of every element of `self` as a 0-dim tensor of `result_dtype`; inputs already checked.
at::Tensor sum_all(const at::Tensor& self, c10::ScalarType result_dtype) {
  constexpr const char* op = "workbook::sum";
  at::Tensor input = self.contiguous();
  at::Tensor out = at::empty({}, self.options().dtype(result_dtype));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kInt, at::kLong, input.scalar_type(), op, [&] {
    using in_t = scalar_t;
    using acc_t = sum_acc_t<in_t>;
    const in_t* p = input.const_data_ptr<in_t>();
    const acc_t total = at::parallel_reduce(
        0, input.numel(), kGrain, acc_t(0),
        [&](int64_t begin, int64_t end, acc_t partial) { return partial + sum_contiguous(p + begin, end - begin); },
        std::plus<acc_t>());
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kInt, at::kLong, result_dtype, op, [&] { *out.mutable_data_ptr<scalar_t>() = static_cast<scalar_t>(total); });
  });
  return out;
}

at::Tensor sum(c10::DispatchKeySet ks, const at::Tensor& self, std::optional<c10::ScalarType> dtype) {
  trace::Scope scope("sum", ks, self);
  check_device("workbook::sum", "self", self, kCPU);
  return sum_all(self, check_sum_inputs("workbook::sum", self, dtype));
}

at::Tensor all_reduce(c10::DispatchKeySet ks, const at::Tensor& self) {
  trace::Scope scope("all_reduce", ks, self);
  check_device("workbook::all_reduce", "self", self, kCPU);
  check_all_reduce_inputs("workbook::all_reduce", self);
  return sum_all(self, at::kLong);
}

// Matmul, C[n, m] = A[n, k] @ B[k, m], all row-major and contiguous.
//
// The micro-kernel keeps a tile of C of kRows rows x kCols vectors in registers: each vector of B
// loaded is used kRows times, each element of A (broadcast to a vector) kCols times, one fused
// multiply-add per pair. 6 x 2 = 12 accumulators + 2 B vectors + 1 broadcast = 15 registers: it
// fits the 16 of AVX2 (a larger tile spills to memory there) and leaves room in the 32 of AVX-512.
// The tile is 6 x 16 floats with AVX2, 6 x 32 with AVX-512: the width comes from Vectorized.
constexpr int kRows = 6;
constexpr int kCols = 2;
// Cache blocking: a thread works on kRowBlock rows of A at a time, and kDepth columns of A (rows of
// B) at a time. For each column tile it first copies ("packs") that kDepth x tile slice of B into a
// small contiguous buffer: read straight from B, the slice's rows lie a whole row of B apart (4 KB
// for 1024 floats), all in the same few L1 cache sets, and evict one another. Packed, the slice
// stays in L1 while every row tile of the block reuses it, and the block of A stays in L2.
constexpr int64_t kRowBlock = 96;
constexpr int64_t kDepth = 256;

// C tile += A[0:kRows, 0:depth] @ B[0:depth, 0:kCols vectors]; `first` starts from zero instead.
template <typename T>
void matmul_tile(const T* A, const T* B, T* C, int64_t depth, int64_t lda, int64_t ldb, int64_t ldc, bool first) {
  using Vec = at::vec::Vectorized<T>;
  Vec acc[kRows][kCols];
  for (int r = 0; r < kRows; ++r) {
    for (int c = 0; c < kCols; ++c) acc[r][c] = first ? Vec(T(0)) : Vec::loadu(C + r * ldc + c * Vec::size());
  }
  for (int64_t p = 0; p < depth; ++p) {
    Vec b[kCols];
    for (int c = 0; c < kCols; ++c) b[c] = Vec::loadu(B + p * ldb + c * Vec::size());
    for (int r = 0; r < kRows; ++r) {
      const Vec a(A[r * lda + p]);
      for (int c = 0; c < kCols; ++c) acc[r][c] = at::vec::fmadd(a, b[c], acc[r][c]);
    }
  }
  for (int r = 0; r < kRows; ++r) {
    for (int c = 0; c < kCols; ++c) acc[r][c].store(C + r * ldc + c * Vec::size());
  }
}

// The ragged edges (fewer rows or columns than a full tile): plain loops, one row at a time.
template <typename T>
void matmul_edge(const T* A, const T* B, T* C, int64_t rows, int64_t cols, int64_t depth, int64_t lda, int64_t ldb,
                 int64_t ldc, bool first) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      T acc = first ? T(0) : C[r * ldc + c];
      for (int64_t p = 0; p < depth; ++p) acc += A[r * lda + p] * B[p * ldb + c];
      C[r * ldc + c] = acc;
    }
  }
}

// float and double. Threads take blocks of rows; within a block: depth slices, then column tiles
// (packed), then row tiles, the innermost loop, which reuses the packed slice.
template <typename T>
void matmul_blocked(const T* A, const T* B, T* C, int64_t n, int64_t k, int64_t m) {
  constexpr int64_t kTileCols = kCols * at::vec::Vectorized<T>::size();
  const int64_t row_blocks = (n + kRowBlock - 1) / kRowBlock;
  at::parallel_for(0, row_blocks, 1, [&](int64_t first_block, int64_t last_block) {
    std::vector<T> packed(kDepth * kTileCols);
    for (int64_t i0 = first_block * kRowBlock; i0 < std::min(n, last_block * kRowBlock); i0 += kRowBlock) {
      const int64_t i1 = std::min(n, i0 + kRowBlock);
      for (int64_t p = 0; p < std::max<int64_t>(k, 1); p += kDepth) {
        const int64_t depth = std::min(kDepth, k - p);
        for (int64_t j = 0; j < m; j += kTileCols) {
          const int64_t cols = std::min(kTileCols, m - j);
          for (int64_t q = 0; q < depth; ++q) {
            std::copy_n(B + (p + q) * m + j, cols, packed.data() + q * kTileCols);
          }
          for (int64_t i = i0; i < i1; i += kRows) {
            const int64_t rows = std::min<int64_t>(kRows, i1 - i);
            const T* a = A + i * k + p;
            if (rows == kRows && cols == kTileCols) {
              matmul_tile(a, packed.data(), C + i * m + j, depth, k, kTileCols, m, p == 0);
            } else {
              matmul_edge(a, packed.data(), C + i * m + j, rows, cols, depth, k, kTileCols, m, p == 0);
            }
          }
        }
      }
    }
  });
}

// bfloat16 and float16: widen both inputs to float, multiply in float, round the result once (as
// torch.matmul does: products and sums in a reduced type would lose most of their digits).
template <typename T>
void matmul_reduced(const T* A, const T* B, T* C, int64_t n, int64_t k, int64_t m) {
  std::vector<float> a(A, A + n * k), b(B, B + k * m), c(n * m);
  matmul_blocked(a.data(), b.data(), c.data(), n, k, m);
  std::copy(c.begin(), c.end(), C);
}

at::Tensor matmul(c10::DispatchKeySet ks, const at::Tensor& self, const at::Tensor& other) {
  trace::Scope scope("matmul", ks, self, other);
  constexpr const char* op = "workbook::matmul";
  check_device(op, "self", self, kCPU);
  check_device(op, "other", other, kCPU);
  check_matmul_inputs(op, self, other);
  const int64_t n = self.size(0), k = self.size(1), m = other.size(1);
  at::Tensor a = self.contiguous(), b = other.contiguous();
  at::Tensor out = at::empty({n, m}, self.options());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, a.scalar_type(), op, [&] {
    const scalar_t* pa = a.const_data_ptr<scalar_t>();
    const scalar_t* pb = b.const_data_ptr<scalar_t>();
    scalar_t* pc = out.mutable_data_ptr<scalar_t>();
    if constexpr (std::is_floating_point_v<scalar_t>) {
      matmul_blocked(pa, pb, pc, n, k, m);
    } else {
      matmul_reduced(pa, pb, pc, n, k, m);
    }
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(workbook, CPU, m) {
  m.impl("add", &add);
  m.impl("add_", &add_);
  m.impl("add_out", &add_out);
  m.impl("sum", &sum);
  m.impl("all_reduce", &all_reduce);
  m.impl("matmul", &matmul);
}

}  // namespace workbook
