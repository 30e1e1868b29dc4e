// Fallthrough kernels: "this key has nothing to do for this operator, go straight to the next".
// all_reduce takes and returns integers, which have no gradient, so autograd has nothing to
// record: a fallthrough at Autograd skips torch's autograd fallback kernel, which would otherwise
// run on every call. ADInplaceOrView is a fallthrough for every operator already (a backend
// fallback); registering it here says so explicitly, as seed 002 does.
#include <torch/library.h>

TORCH_LIBRARY_IMPL(workbook, Autograd, m) {
  m.impl("all_reduce", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(workbook, ADInplaceOrView, m) {
  m.impl("all_reduce", torch::CppFunction::makeFallthrough());
}
