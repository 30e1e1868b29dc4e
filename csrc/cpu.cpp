// CPU kernels, registered at the CPU dispatch key. Each kernel takes the DispatchKeySet first
// (the dispatcher passes it; the schema does not mention it) so it can record its trace event.
// Inputs that are not contiguous are made contiguous; tensors written in place must already be.
//
// Speed: helpers/build.py compiles with -O3 -march=native (a JIT build runs where it was built),
// and the loops below are written so the compiler can vectorize them: independent accumulators
// in sum, a register tile in matmul. at::parallel_for / parallel_reduce spread work over cores.
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <algorithm>
#include <functional>

#include "checks.h"
#include "trace.h"

namespace workbook {
namespace {

constexpr auto kCPU = c10::DeviceType::CPU;
// Elements per parallel task: below this, starting a thread costs more than the work (ATen uses 32768).
constexpr int64_t kGrain = 32768;

// out = a + b, elementwise; all three the same shape and dtype, a and b contiguous.
// c10::BFloat16 and c10::Half add in float and round the result once, as torch.add does.
void add_into(const at::Tensor& a, const at::Tensor& b, const at::Tensor& out) {
  AT_DISPATCH_ALL_TYPES_AND2(at::kBFloat16, at::kHalf, a.scalar_type(), "workbook::add", [&] {
    const scalar_t* pa = a.const_data_ptr<scalar_t>();
    const scalar_t* pb = b.const_data_ptr<scalar_t>();
    scalar_t* po = out.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, a.numel(), kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) po[i] = pa[i] + pb[i];
    });
  });
}

at::Tensor add(c10::DispatchKeySet ks, const at::Tensor& self, const at::Tensor& other) {
  trace::Scope scope("add", ks, self, other);
  check_device("workbook::add", "self", self, kCPU);
  check_device("workbook::add", "other", other, kCPU);
  check_add_inputs("workbook::add", self, other);
  at::Tensor out = at::empty(self.sizes(), self.options());
  add_into(self.contiguous(), other.contiguous(), out);
  return out;
}

void add_(c10::DispatchKeySet ks, at::Tensor& self, const at::Tensor& other) {
  trace::Scope scope("add_", ks, self, other);
  check_device("workbook::add_", "self", self, kCPU);
  check_device("workbook::add_", "other", other, kCPU);
  check_add_inputs("workbook::add_", self, other);
  check_writable("workbook::add_", "self", self);
  add_into(self, other.contiguous(), self);
}

void add_out(c10::DispatchKeySet ks, const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  trace::Scope scope("add_out", ks, self, other, out);
  check_device("workbook::add_out", "self", self, kCPU);
  check_device("workbook::add_out", "other", other, kCPU);
  check_device("workbook::add_out", "out", out, kCPU);
  check_add_inputs("workbook::add_out", self, other);
  check_add_out("workbook::add_out", out, self);
  add_into(self.contiguous(), other.contiguous(), out);
}

// Sum of p[0..n) in kLanes independent partial sums of type lane_t. A single running total is a
// chain of dependent adds that the compiler may not reorder (float addition is not associative);
// separate lanes are independent, so -O3 turns the inner loop into vector adds. 512 bytes of
// lanes = 8 AVX-512 registers' worth: enough independent adds in flight to hide their latency
// (32 float lanes measured half as fast).
template <typename lane_t, typename in_t>
lane_t sum_lanes(const in_t* p, int64_t n) {
  constexpr int kLanes = 512 / sizeof(lane_t);
  lane_t lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) lanes[j] += static_cast<lane_t>(p[i + j]);
  }
  lane_t total = 0;
  for (int j = 0; j < kLanes; ++j) total += lanes[j];
  for (; i < n; ++i) total += static_cast<lane_t>(p[i]);
  return total;
}

// Integers: int64 lanes (torch.sum's accumulator), each element widened inside the vector loop.
// Floating point: lanes of the input's own type over blocks, block totals added in double. The
// lanes run at full vector width, and each adds only kBlock / kLanes values before its total
// moves to double, so rounding error stays below what a float32 result can show. (Widening every
// element to double was 3x slower; short blocks spent their time adding up the lanes.)
template <typename in_t>
using sum_acc_t = std::conditional_t<std::is_integral_v<in_t>, int64_t, double>;

template <typename in_t>
sum_acc_t<in_t> sum_contiguous(const in_t* p, int64_t n) {
  if constexpr (std::is_integral_v<in_t>) {
    return sum_lanes<int64_t>(p, n);
  } else {
    constexpr int64_t kBlock = 16384;
    double total = 0;
    for (int64_t i = 0; i < n; i += kBlock) total += sum_lanes<in_t>(p + i, std::min(kBlock, n - i));
    return total;
  }
}

// The sum of every element of `self` as a 0-dim tensor of `result_dtype`; inputs already checked.
at::Tensor sum_all(const at::Tensor& self, c10::ScalarType result_dtype) {
  constexpr const char* op = "workbook::sum";
  at::Tensor input = self.contiguous();
  at::Tensor out = at::empty({}, self.options().dtype(result_dtype));
  AT_DISPATCH_ALL_TYPES(input.scalar_type(), op, [&] {
    using in_t = scalar_t;
    using acc_t = sum_acc_t<in_t>;
    const in_t* p = input.const_data_ptr<in_t>();
    const acc_t total = at::parallel_reduce(
        0, input.numel(), kGrain, acc_t(0),
        [&](int64_t begin, int64_t end, acc_t partial) { return partial + sum_contiguous(p + begin, end - begin); },
        std::plus<acc_t>());
    AT_DISPATCH_ALL_TYPES(result_dtype, op, [&] { *out.mutable_data_ptr<scalar_t>() = static_cast<scalar_t>(total); });
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

// C[rows, cols] = A[rows, k] @ B[k, cols] for one tile, all row-major with leading dimensions lda,
// ldb, ldc. With MR and NC known at compile time the accumulator tile lives in vector registers:
// each B row segment loaded is used MR times, each A element NC times. Acc is the type sums are
// kept in: T itself for float and double, float for bfloat16 and float16 (at::opmath_type), so
// a reduced-precision product is rounded once, at the end, as torch.matmul does.
template <typename T, typename Acc, int MR, int NC>
void matmul_tile(const T* A, const T* B, T* C, int64_t k, int64_t lda, int64_t ldb, int64_t ldc) {
  Acc acc[MR][NC] = {};
  for (int64_t p = 0; p < k; ++p) {
    const T* b = B + p * ldb;
    for (int r = 0; r < MR; ++r) {
      const Acc a = static_cast<Acc>(A[r * lda + p]);
      for (int c = 0; c < NC; ++c) acc[r][c] += a * static_cast<Acc>(b[c]);
    }
  }
  for (int r = 0; r < MR; ++r) {
    for (int c = 0; c < NC; ++c) C[r * ldc + c] = static_cast<T>(acc[r][c]);
  }
}

// The same for the ragged edges of the matrix (fewer rows or columns than a full tile): one row
// at a time, at most NC columns.
template <typename T, typename Acc, int NC>
void matmul_edge(const T* A, const T* B, T* C, int64_t rows, int64_t cols, int64_t k, int64_t lda, int64_t ldb,
                 int64_t ldc) {
  for (int64_t r = 0; r < rows; ++r) {
    Acc acc[NC] = {};
    for (int64_t p = 0; p < k; ++p) {
      const Acc a = static_cast<Acc>(A[r * lda + p]);
      const T* b = B + p * ldb;
      for (int64_t c = 0; c < cols; ++c) acc[c] += a * static_cast<Acc>(b[c]);
    }
    for (int64_t c = 0; c < cols; ++c) C[r * ldc + c] = static_cast<T>(acc[c]);
  }
}

// Tiles of MR rows x NC columns. The outer loop walks column panels so that a panel of B
// (k x NC values) stays in cache while every row tile of this thread's rows uses it.
template <typename T>
void matmul_blocked(const T* A, const T* B, T* C, int64_t n, int64_t k, int64_t m) {
  using Acc = at::opmath_type<T>;
  constexpr int MR = 4;
  constexpr int NC = 256 / sizeof(Acc);  // 64 floats or 32 doubles: 4 AVX-512 registers per row
  const int64_t row_tiles = (n + MR - 1) / MR;
  at::parallel_for(0, row_tiles, 1, [&](int64_t first_tile, int64_t last_tile) {
    for (int64_t j = 0; j < m; j += NC) {
      const int64_t cols = std::min<int64_t>(NC, m - j);
      for (int64_t t = first_tile; t < last_tile; ++t) {
        const int64_t i = t * MR, rows = std::min<int64_t>(MR, n - i);
        if (rows == MR && cols == NC) {
          matmul_tile<T, Acc, MR, NC>(A + i * k, B + j, C + i * m + j, k, k, m, m);
        } else {
          matmul_edge<T, Acc, NC>(A + i * k, B + j, C + i * m + j, rows, cols, k, k, m, m);
        }
      }
    }
  });
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
    matmul_blocked<scalar_t>(a.const_data_ptr<scalar_t>(), b.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(),
                             n, k, m);
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
