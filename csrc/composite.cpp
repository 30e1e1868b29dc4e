// Operators written in terms of other operators, registered at the two composite alias keys.
//
// CompositeImplicitAutograd: the kernel fills every backend key *and* every Autograd key. It runs
// above autograd, so autograd sees only the operators it calls: affine is differentiable exactly
// when matmul and add are, with no backward of its own. It runs on any backend its parts run on.
//
// CompositeExplicitAutograd: the kernel fills every backend key (CPU, CUDA, Meta, ...) but no
// Autograd key. It runs below autograd, so autograd sees `mean` itself and needs an Autograd
// kernel for it (csrc/autograd.cpp, lesson 04); without one, torch's autograd fallback warns and
// gradients stop here.
//
// `row` returns a view, and is CompositeImplicitAutograd for that reason: built from aten::select, a
// view operator that torch registers at every key, so autograd records select's view (its base, its
// gradient) and torch.compile decomposes row into select before functionalization, which refuses
// custom operators that return views (lesson 03 shows the alternative below autograd, and why not).
#include <ATen/core/Tensor.h>
#include <ATen/ops/div.h>
#include <ATen/ops/select.h>
#include <torch/library.h>

#include "checks.h"
#include "ops.h"
#include "trace.h"

namespace workbook {
namespace {

at::Tensor affine(c10::DispatchKeySet ks, const at::Tensor& self, const at::Tensor& weight, const at::Tensor& bias) {
  trace::Scope scope("affine", ks, self, weight, bias);
  return ops::add(ops::matmul(self, weight), bias);
}

// A composite kernel also runs while torch.compile traces with symbolic shapes, so it asks for
// sym_numel() (a SymInt) rather than numel(), which fails on a tensor with symbolic sizes.
// An empty tensor gives nan (0 / 0), as torch.mean does.
at::Tensor mean(c10::DispatchKeySet ks, const at::Tensor& self) {
  trace::Scope scope("mean", ks, self);
  check_dtype("workbook::mean", "self", self, {at::kFloat, at::kDouble});
  return at::div(ops::sum(self), self.sym_numel());
}

// Row `index` of a matrix as a view: same storage, as the schema's Tensor(a) promises. Negative indices count
// from the end, as in Python. The size is a SymInt (symbolic under torch.compile(dynamic=True)).
at::Tensor row(c10::DispatchKeySet ks, const at::Tensor& self, int64_t index) {
  trace::Scope scope("row", ks, self);
  constexpr const char* op = "workbook::row";
  check_strided(op, "self", self);
  check_dim(op, "self", self, 2);
  const c10::SymInt rows = self.sym_size(0);
  TORCH_CHECK(-rows <= index && rows > index, op, ": `index` ", index, " is out of range for ", rows, " rows");
  return self.select(0, index);
}

}  // namespace

TORCH_LIBRARY_IMPL(workbook, CompositeImplicitAutograd, m) {
  m.impl("affine", &affine);
  m.impl("row", &row);
}

TORCH_LIBRARY_IMPL(workbook, CompositeExplicitAutograd, m) {
  m.impl("mean", &mean);
}

}  // namespace workbook
