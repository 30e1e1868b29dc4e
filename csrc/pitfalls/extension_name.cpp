// PITFALL: naming the namespace after the extension. torch.utils.cpp_extension.load() compiles with
// -DTORCH_EXTENSION_NAME=<name>, and renames the extension <name>_v1, <name>_v2, ... each time it is
// rebuilt with changed sources or flags in the same process: the namespace moves with it.
// (Before the fix for pytorch#127615 the macro was not even expanded: the namespace was literally
// "TORCH_EXTENSION_NAME".) Write the namespace out instead: TORCH_LIBRARY(my_ops, m).
#include <torch/library.h>

TORCH_LIBRARY(TORCH_EXTENSION_NAME, m) {
  m.def("hello(Tensor self) -> Tensor");
}
