// CPU kernels, registered at the CPU dispatch key. Each kernel takes the DispatchKeySet first
// (the dispatcher passes it; the schema does not mention it) so it can record its trace event.
// Inputs that are not contiguous are made contiguous; tensors written in place must already be.
#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "checks.h"
#include "trace.h"

namespace workbook {
namespace {

constexpr auto kCPU = c10::DeviceType::CPU;

void check_add_args(const char* op, const at::Tensor& self, const at::Tensor& other) {
  check_device(op, "self", self, kCPU);
  check_device(op, "other", other, kCPU);
  check_strided(op, "self", self);
  check_strided(op, "other", other);
  check_dtype(op, "self", self, {at::kFloat, at::kDouble, at::kInt, at::kLong});
  check_same_dtype(op, "other", other, "self", self);
  check_same_shape(op, "other", other, "self", self);
}

void check_writable(const char* op, const char* arg, const at::Tensor& t) {
  TORCH_CHECK(t.is_contiguous(), op, ": `", arg, "` is written in place and must be contiguous");
}

// out = a + b, elementwise; all three the same shape and dtype, a and b contiguous.
void add_into(const at::Tensor& a, const at::Tensor& b, const at::Tensor& out) {
  AT_DISPATCH_ALL_TYPES(a.scalar_type(), "workbook::add", [&] {
    const scalar_t* pa = a.const_data_ptr<scalar_t>();
    const scalar_t* pb = b.const_data_ptr<scalar_t>();
    scalar_t* po = out.mutable_data_ptr<scalar_t>();
    for (int64_t i = 0, n = a.numel(); i < n; ++i) po[i] = pa[i] + pb[i];
  });
}

at::Tensor add(c10::DispatchKeySet ks, const at::Tensor& self, const at::Tensor& other) {
  trace::Scope scope("add", ks, self, other);
  check_add_args("workbook::add", self, other);
  at::Tensor out = at::empty(self.sizes(), self.options());
  add_into(self.contiguous(), other.contiguous(), out);
  return out;
}

void add_(c10::DispatchKeySet ks, at::Tensor& self, const at::Tensor& other) {
  trace::Scope scope("add_", ks, self, other);
  check_add_args("workbook::add_", self, other);
  check_writable("workbook::add_", "self", self);
  add_into(self, other.contiguous(), self);
}

void add_out(c10::DispatchKeySet ks, const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  trace::Scope scope("add_out", ks, self, other, out);
  check_add_args("workbook::add_out", self, other);
  check_device("workbook::add_out", "out", out, kCPU);
  check_same_dtype("workbook::add_out", "out", out, "self", self);
  check_same_shape("workbook::add_out", "out", out, "self", self);
  check_writable("workbook::add_out", "out", out);
  add_into(self.contiguous(), other.contiguous(), out);
}

// Result dtype of sum, as torch.sum: integers accumulate into int64 unless dtype says otherwise.
c10::ScalarType sum_result_dtype(const at::Tensor& self, std::optional<c10::ScalarType> dtype) {
  if (dtype) return *dtype;
  return c10::isIntegralType(self.scalar_type(), /*includeBool=*/true) ? at::kLong : self.scalar_type();
}

at::Tensor sum(c10::DispatchKeySet ks, const at::Tensor& self, std::optional<c10::ScalarType> dtype) {
  trace::Scope scope("sum", ks, self);
  constexpr const char* op = "workbook::sum";
  check_device(op, "self", self, kCPU);
  check_strided(op, "self", self);
  check_dtype(op, "self", self, {at::kFloat, at::kDouble, at::kInt, at::kLong});
  const auto result_dtype = sum_result_dtype(self, dtype);
  TORCH_CHECK(result_dtype == at::kFloat || result_dtype == at::kDouble || result_dtype == at::kInt ||
                  result_dtype == at::kLong,
              op, ": `dtype` must be one of Float, Double, Int, Long, got ", result_dtype);
  at::Tensor input = self.contiguous();
  at::Tensor out = at::empty({}, self.options().dtype(result_dtype));
  AT_DISPATCH_ALL_TYPES(input.scalar_type(), op, [&] {
    using in_t = scalar_t;
    const in_t* p = input.const_data_ptr<in_t>();
    AT_DISPATCH_ALL_TYPES(result_dtype, op, [&] {
      scalar_t total = 0;
      for (int64_t i = 0, n = input.numel(); i < n; ++i) total += static_cast<scalar_t>(p[i]);
      *out.mutable_data_ptr<scalar_t>() = total;
    });
  });
  return out;
}

at::Tensor matmul(c10::DispatchKeySet ks, const at::Tensor& self, const at::Tensor& other) {
  trace::Scope scope("matmul", ks, self, other);
  constexpr const char* op = "workbook::matmul";
  check_device(op, "self", self, kCPU);
  check_device(op, "other", other, kCPU);
  check_strided(op, "self", self);
  check_strided(op, "other", other);
  check_dtype(op, "self", self, {at::kFloat, at::kDouble});
  check_same_dtype(op, "other", other, "self", self);
  check_dim(op, "self", self, 2);
  check_dim(op, "other", other, 2);
  TORCH_CHECK(self.size(1) == other.size(0), op, ": `self` is ", self.sizes(), " and `other` is ", other.sizes(),
              "; self.size(1) must equal other.size(0)");
  const int64_t n = self.size(0), k = self.size(1), m = other.size(1);
  at::Tensor a = self.contiguous(), b = other.contiguous();
  at::Tensor out = at::empty({n, m}, self.options());
  AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), op, [&] {
    const scalar_t* pa = a.const_data_ptr<scalar_t>();
    const scalar_t* pb = b.const_data_ptr<scalar_t>();
    scalar_t* po = out.mutable_data_ptr<scalar_t>();
    // i-k-j order: the inner loop walks a row of `other` and a row of `out` contiguously.
    for (int64_t i = 0; i < n; ++i) {
      scalar_t* out_row = po + i * m;
      for (int64_t j = 0; j < m; ++j) out_row[j] = 0;
      for (int64_t p = 0; p < k; ++p) {
        const scalar_t a_ip = pa[i * k + p];
        const scalar_t* b_row = pb + p * m;
        for (int64_t j = 0; j < m; ++j) out_row[j] += a_ip * b_row[j];
      }
    }
  });
  return out;
}

at::Tensor row(c10::DispatchKeySet ks, const at::Tensor& self, int64_t index) {
  trace::Scope scope("row", ks, self);
  constexpr const char* op = "workbook::row";
  check_device(op, "self", self, kCPU);
  check_strided(op, "self", self);
  check_dim(op, "self", self, 2);
  const int64_t rows = self.size(0);
  TORCH_CHECK(-rows <= index && index < rows, op, ": `index` ", index, " is out of range for ", rows, " rows");
  if (index < 0) index += rows;
  // Same storage, shifted offset: a view, as the schema's Tensor(a) promises.
  return self.as_strided({self.size(1)}, {self.stride(1)}, self.storage_offset() + index * self.stride(0));
}

}  // namespace

TORCH_LIBRARY_IMPL(workbook, CPU, m) {
  m.impl("add", &add);
  m.impl("add_", &add_);
  m.impl("add_out", &add_out);
  m.impl("sum", &sum);
  m.impl("matmul", &matmul);
  m.impl("row", &row);
}

}  // namespace workbook
