// PITFALL (seed 004): a second library that also opens namespace `workbook` with TORCH_LIBRARY.
// Loaded into a process that already has csrc/schemas.cpp, the dispatcher refuses the second
// definition inside a static initializer, and the process aborts. Lesson 01 shows it in a subprocess.
#include <torch/library.h>

TORCH_LIBRARY(workbook, m) {
  m.def("scale(Tensor self, float factor) -> Tensor");
}
