// Argument checks shared by every kernel. Each failure is a TORCH_CHECK (a RuntimeError in
// Python) whose message names the operator and the argument, e.g.
//   workbook::add: `other` must be on cpu, got meta
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <initializer_list>

namespace workbook {

inline void check_device(const char* op, const char* arg, const at::Tensor& t, c10::DeviceType want) {
  TORCH_CHECK(t.device().type() == want, op, ": `", arg, "` must be on ", c10::DeviceTypeName(want, /*lower_case=*/true),
              ", got ", t.device());
}

inline void check_strided(const char* op, const char* arg, const at::Tensor& t) {
  TORCH_CHECK(t.layout() == c10::kStrided, op, ": `", arg, "` must be a dense (strided) tensor, got layout ", t.layout());
}

inline void check_dtype(const char* op, const char* arg, const at::Tensor& t, std::initializer_list<c10::ScalarType> allowed) {
  for (auto dtype : allowed) {
    if (t.scalar_type() == dtype) return;
  }
  std::string names;
  for (auto dtype : allowed) names += (names.empty() ? "" : ", ") + std::string(c10::toString(dtype));
  TORCH_CHECK(false, op, ": `", arg, "` has dtype ", t.scalar_type(), "; supported: ", names);
}

inline void check_dim(const char* op, const char* arg, const at::Tensor& t, int64_t dim) {
  TORCH_CHECK(t.dim() == dim, op, ": `", arg, "` must be ", dim, "-D, got ", t.dim(), "-D with shape ", t.sym_sizes());
}

inline void check_same_dtype(const char* op, const char* arg, const at::Tensor& t, const char* ref_arg, const at::Tensor& ref) {
  TORCH_CHECK(t.scalar_type() == ref.scalar_type(), op, ": `", arg, "` has dtype ", t.scalar_type(), " but `", ref_arg,
              "` has dtype ", ref.scalar_type(), "; they must match");
}

// Sizes are compared as SymInts: under torch.compile(dynamic=True) a Meta kernel sees symbolic sizes (s0, s1, ...),
// where sizes() would pin each one to its current value. Comparing two symbols records a guard (the compiled code is
// valid while they are equal).
inline void check_same_shape(const char* op, const char* arg, const at::Tensor& t, const char* ref_arg, const at::Tensor& ref) {
  TORCH_CHECK(t.sym_sizes() == ref.sym_sizes(), op, ": `", arg, "` has shape ", t.sym_sizes(), " but `", ref_arg,
              "` has shape ", ref.sym_sizes(), "; they must match (no broadcasting)");
}

}  // namespace workbook

// ---------------------------------------------------------------------------------------------
// Per-operator checks, shared by every backend's kernels. Each kernel checks the device itself
// (check_device), then calls these for everything else.
namespace workbook {

// add's, add_'s and add_out's inputs: `first` is named `self` in add's schema, `x` in the mutable ones'.
inline void check_add_inputs(const char* op, const char* first_arg, const at::Tensor& first, const at::Tensor& other) {
  check_strided(op, first_arg, first);
  check_strided(op, "other", other);
  // bfloat16 and float16: the dtypes autocast casts to (lesson 05).
  check_dtype(op, first_arg, first, {at::kFloat, at::kDouble, at::kInt, at::kLong, at::kBFloat16, at::kHalf});
  check_same_dtype(op, "other", other, first_arg, first);
  check_same_shape(op, "other", other, first_arg, first);
}

// A tensor the op writes into must be contiguous: the kernel writes straight into its memory.
inline void check_writable(const char* op, const char* arg, const at::Tensor& t) {
  TORCH_CHECK(t.is_contiguous(), op, ": `", arg, "` is written in place and must be contiguous");
}

// add_out's `out`: same dtype and shape as `x`, and writable.
inline void check_add_out(const char* op, const at::Tensor& out, const at::Tensor& x) {
  check_same_dtype(op, "out", out, "x", x);
  check_same_shape(op, "out", out, "x", x);
  check_writable(op, "out", out);
}

// Checks sum's input and returns its result dtype, as torch.sum: integers accumulate into int64
// unless `dtype` says otherwise.
inline c10::ScalarType check_sum_inputs(const char* op, const at::Tensor& self, std::optional<c10::ScalarType> dtype) {
  check_strided(op, "self", self);
  check_dtype(op, "self", self, {at::kFloat, at::kDouble, at::kInt, at::kLong});
  const auto result = dtype ? *dtype : (c10::isIntegralType(self.scalar_type(), true) ? at::kLong : self.scalar_type());
  TORCH_CHECK(result == at::kFloat || result == at::kDouble || result == at::kInt || result == at::kLong, op,
              ": `dtype` must be one of Float, Double, Int, Long, got ", result);
  return result;
}

// all_reduce: integers only; its result is int64, like sum's for integers.
inline void check_all_reduce_inputs(const char* op, const at::Tensor& self) {
  check_strided(op, "self", self);
  check_dtype(op, "self", self, {at::kInt, at::kLong});
}

inline void check_matmul_inputs(const char* op, const at::Tensor& self, const at::Tensor& other) {
  check_strided(op, "self", self);
  check_strided(op, "other", other);
  check_dtype(op, "self", self, {at::kFloat, at::kDouble, at::kBFloat16, at::kHalf});
  check_same_dtype(op, "other", other, "self", self);
  check_dim(op, "self", self, 2);
  check_dim(op, "other", other, 2);
  TORCH_CHECK(self.sym_size(1) == other.sym_size(0), op, ": `self` is ", self.sym_sizes(), " and `other` is ",
              other.sym_sizes(), "; self.size(1) must equal other.size(0)");
}

}  // namespace workbook
