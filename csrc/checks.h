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
  TORCH_CHECK(t.dim() == dim, op, ": `", arg, "` must be ", dim, "-D, got ", t.dim(), "-D with shape ", t.sizes());
}

inline void check_same_dtype(const char* op, const char* arg, const at::Tensor& t, const char* ref_arg, const at::Tensor& ref) {
  TORCH_CHECK(t.scalar_type() == ref.scalar_type(), op, ": `", arg, "` has dtype ", t.scalar_type(), " but `", ref_arg,
              "` has dtype ", ref.scalar_type(), "; they must match");
}

inline void check_same_shape(const char* op, const char* arg, const at::Tensor& t, const char* ref_arg, const at::Tensor& ref) {
  TORCH_CHECK(t.sizes() == ref.sizes(), op, ": `", arg, "` has shape ", t.sizes(), " but `", ref_arg, "` has shape ",
              ref.sizes(), "; they must match (no broadcasting)");
}

}  // namespace workbook
