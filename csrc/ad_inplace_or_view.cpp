// ADInplaceOrView kernels for the operators that write to an argument (`Tensor(a!)` in the schema).
//
// Autograd saves tensors for backward and remembers each one's version counter. Every in-place
// write must bump the counter, so that a backward that needs the old values sees the change and
// raises instead of computing with modified data. ATen's own in-place ops do it at this key; a
// custom in-place op must too, or autograd is never told. Each kernel passes the call on to the
// keys below (the backend kernel does the write) and then bumps the version of what it wrote.
//
// The pattern of torch's generated ADInplaceOrView kernels (INPLACE_REDISPATCH in
// tools/autograd/gen_inplace_or_view_type.py): redispatch hands *this* call to the keys after this
// one; the guard sends every call the kernels below make themselves (a backend kernel built from
// aten ops) below autograd and this key too, so they neither record a graph nor bump a version again.
#include <ATen/core/LegacyTypeDispatch.h>  // at::AutoDispatchBelowADInplaceOrView
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include "trace.h"

namespace workbook {
namespace {

at::Tensor& add_(c10::DispatchKeySet ks, at::Tensor& x, const at::Tensor& other) {
  trace::Scope scope("add_", ks, x, other);
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("workbook::add_", "")
                             .typed<at::Tensor&(at::Tensor&, const at::Tensor&)>();
  {
    // Hand the call to the keys below this one (the backend kernel does the write); the guard covers the calls the
    // backend kernel makes itself. Then bump.
    at::AutoDispatchBelowADInplaceOrView guard;
    op.redispatch(ks & c10::after_ADInplaceOrView_keyset, x, other);
  }
  x.unsafeGetTensorImpl()->bump_version();
  return x;
}

at::Tensor& add_out(c10::DispatchKeySet ks, const at::Tensor& x, const at::Tensor& other, at::Tensor& out) {
  trace::Scope scope("add_out", ks, x, other, out);
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("workbook::add_out", "")
                             .typed<at::Tensor&(const at::Tensor&, const at::Tensor&, at::Tensor&)>();
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    op.redispatch(ks & c10::after_ADInplaceOrView_keyset, x, other, out);
  }
  out.unsafeGetTensorImpl()->bump_version();
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(workbook, ADInplaceOrView, m) {
  m.impl("add_", &add_);
  m.impl("add_out", &add_out);
}

}  // namespace workbook
