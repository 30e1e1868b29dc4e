// Every operator of the workbook, declared once: name, argument types, return types, aliasing.
// This file has no kernels. Kernels live in one file per dispatch key (cpu.cpp, meta.cpp, ...),
// registered with TORCH_LIBRARY_IMPL, which any number of files may do for the same namespace.
// TORCH_LIBRARY itself may appear only once per namespace in a process.
#include <torch/library.h>

TORCH_LIBRARY(workbook, m) {
  // Elementwise sum of two tensors of the same shape and dtype (seed 002's myadd).
  m.def("add(Tensor self, Tensor other) -> Tensor");

  // In-place: adds `other` into `x` and returns `x`, as aten's add_ does. `Tensor(a!)` on the argument says `x` is
  // written; on the return, that the result *is* `x`. A custom op that returns a mutated input needs a tag that says
  // which kind of mutation it is (torch >= 2.13): Tag::inplace, the first argument, mutated and returned. Without the
  // tag the call still runs eagerly, but torch.compile cannot turn it into a functional one and refuses it (lesson 03).
  // The first argument is `x`, not `self`: mutable ops are compiled through auto_functionalized, which takes arguments
  // by name and warns that `self` is ambiguous there.
  m.def("add_(Tensor(a!) x, Tensor other) -> Tensor(a!)", {at::Tag::inplace});

  // out= form: writes the sum into a caller-provided tensor and returns it. Tag::out: the mutated arguments are
  // keyword-only and returned, in order. Like aten's out= overloads, it refuses inputs that require grad.
  m.def("add_out(Tensor x, Tensor other, *, Tensor(a!) out) -> Tensor(a!)", {at::Tag::out});

  // Sum of all elements as a 0-dim tensor (seed 000's all_reduce). Like torch.sum, integer
  // inputs accumulate into int64 unless `dtype` says otherwise. `*` makes dtype keyword-only;
  // `ScalarType?` with `=None` makes it optional.
  m.def("sum(Tensor self, *, ScalarType? dtype=None) -> Tensor");

  // Seed 000's all_reduce exactly: the sum of an integer tensor (int32 or int64), as int64.
  // Integers have no gradient, so lesson 03 registers it as a fallthrough at Autograd.
  m.def("all_reduce(Tensor self) -> Tensor");

  // 2-D matrix product (seed 004's custom matmul).
  m.def("matmul(Tensor self, Tensor other) -> Tensor");

  // A view: row `index` of a matrix. `Tensor(a) self -> Tensor(a)` promises that the output
  // shares storage with `self` (it aliases it) and that nothing is written. Its kernel is
  // CompositeImplicitAutograd, built from aten's select (csrc/composite.cpp, lesson 03).
  m.def("row(Tensor(a) self, int index) -> Tensor(a)");

  // Two operators built from the others (csrc/composite.cpp), to compare the composite keys:
  // self @ weight + bias (bias has the output's shape: workbook::add does not broadcast) ...
  m.def("affine(Tensor self, Tensor weight, Tensor bias) -> Tensor");
  // ... and the mean of all elements of a floating-point tensor, sum(self) / numel.
  m.def("mean(Tensor self) -> Tensor");
}
