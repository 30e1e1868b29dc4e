// Runs an AOTInductor package (.pt2) with no Python at all: a C++ program linked to libtorch.
//
//   runner MODEL.pt2 [OPS_LIBRARY.so ...] < input.txt
//
// Reads one float32 matrix from stdin ("rows cols" then the values), runs the model, prints the output the same way.
// The model calls workbook operators, so their library must be loaded first: the package holds the name
// `workbook::matmul`, not its kernels, and asks the dispatcher for it when the model is loaded.
#include <ATen/ops/empty.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>

#include <dlfcn.h>

#include <iostream>
#include <span>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: " << argv[0] << " MODEL.pt2 [OPS_LIBRARY.so ...] < input.txt\n";
    return 2;
  }
  // Loading runs the library's TORCH_LIBRARY registrations, as torch.ops.load_library does from Python (there with
  // ctypes.CDLL: RTLD_LOCAL on Linux). The operators are found through the dispatcher, not by symbol, so the
  // library's symbols need not be global: RTLD_LOCAL works here too.
  for (int i = 2; i < argc; ++i) {
    if (dlopen(argv[i], RTLD_NOW | RTLD_LOCAL) == nullptr) {
      std::cerr << dlerror() << "\n";
      return 1;
    }
  }
  int64_t rows = 0, cols = 0;
  std::cin >> rows >> cols;
  at::Tensor input = at::empty({rows, cols}, at::kFloat);
  for (float& value : std::span(input.data_ptr<float>(), input.numel())) std::cin >> value;

  try {
    torch::inductor::AOTIModelPackageLoader model(argv[1]);
    at::Tensor output = model.run({input})[0].contiguous();
    std::cout.precision(9);
    std::cout << output.size(0) << " " << output.size(1) << "\n";
    for (float value : std::span(output.data_ptr<float>(), output.numel())) std::cout << value << " ";
    std::cout << "\n";
  } catch (const std::exception& error) {
    std::string message = error.what();
    std::cerr << message.substr(0, message.find('\n')) << "\n";  // its first line, not the C++ stack under it
    return 1;
  }
}
