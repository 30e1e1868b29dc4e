// Calling the workbook's own operators from C++, through the dispatcher.
//
// A kernel that calls another operator should go through the dispatcher, not call that operator's
// CPU function directly: the call then gets every layer the caller's keyset still has (autograd,
// the right backend for the tensor's device, tracing). findSchemaOrThrow looks the operator up
// once; typed<Signature>() checks the C++ signature against the schema.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>

namespace workbook::ops {

inline at::Tensor add(const at::Tensor& self, const at::Tensor& other) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("workbook::add", "")
                             .typed<at::Tensor(const at::Tensor&, const at::Tensor&)>();
  return op.call(self, other);
}

inline at::Tensor& add_(at::Tensor& x, const at::Tensor& other) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("workbook::add_", "")
                             .typed<at::Tensor&(at::Tensor&, const at::Tensor&)>();
  return op.call(x, other);
}

inline at::Tensor matmul(const at::Tensor& self, const at::Tensor& other) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("workbook::matmul", "")
                             .typed<at::Tensor(const at::Tensor&, const at::Tensor&)>();
  return op.call(self, other);
}

inline at::Tensor sum(const at::Tensor& self, std::optional<c10::ScalarType> dtype = std::nullopt) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("workbook::sum", "")
                             .typed<at::Tensor(const at::Tensor&, std::optional<c10::ScalarType>)>();
  return op.call(self, dtype);
}

inline at::Tensor mean(const at::Tensor& self) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("workbook::mean", "")
                             .typed<at::Tensor(const at::Tensor&)>();
  return op.call(self);
}

}  // namespace workbook::ops
