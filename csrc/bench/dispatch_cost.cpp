// The dispatcher timed from C++ (lesson 07, bench/dispatch_cost.py): nanoseconds per call of a workbook
// operator (add, or the in-place add_), or of aten::add.Tensor for comparison, with no Python in the loop.
// Python chooses the process's layers and the thread-local state (grad mode, autocast, excluded keys, the
// recorder), which C++ calls see exactly as Python's do; this file times one way of calling the operator:
//
//   "unboxed"    TypedOperatorHandle::call: C++ arguments straight to each kernel (how csrc/ops.h calls)
//   "boxed"      OperatorHandle::callBoxed: arguments as a stack of IValues (how every call from Python,
//                torch.ops.<ns>.<op>(...), reaches the dispatcher)
//   "backend"    redispatch with the backend key alone: the CPU kernel, every layer above it skipped
//   "observed"   "unboxed" while a RecordFunction callback is registered, as a profiler registers one:
//                the dispatcher then builds a RecordFunction event around every call
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/record_function.h>
#include <torch/library.h>

#include <chrono>
#include <string>

namespace {

template <typename Call>
double ns_per(int64_t calls, Call call) {
  for (int64_t i = 0; i < calls / 10 + 1; ++i) call();  // warm-up: caches, branch predictors, the allocator
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < calls; ++i) call();
  const std::chrono::duration<double, std::nano> elapsed = std::chrono::steady_clock::now() - start;
  return elapsed.count() / static_cast<double>(calls);
}

// `name`.`overload`(a, b, rest...) `calls` times, the way `how` says: mean nanoseconds per call. `rest` holds the
// arguments after the two tensors (aten::add's alpha).
template <typename Signature, typename... Rest>
double time_op(const char* name, const char* overload, at::Tensor a, const at::Tensor& b, const std::string& how,
               int64_t calls, const Rest&... rest) {
  const auto handle = c10::Dispatcher::singleton().findSchemaOrThrow(name, overload);
  const auto op = handle.typed<Signature>();
  if (how == "unboxed") return ns_per(calls, [&] { op.call(a, b, rest...); });
  if (how == "backend") {
    const c10::DispatchKeySet backend(c10::computeDispatchKey(std::nullopt, a.layout(), a.device()));
    return ns_per(calls, [&] { op.redispatch(backend, a, b, rest...); });
  }
  if (how == "boxed") {
    return ns_per(calls, [&] {
      torch::jit::Stack stack{a, b, rest...};
      handle.callBoxed(&stack);
    });
  }
  if (how == "observed") {
    // A callback that does nothing: what remains is the dispatcher's own RecordFunction bookkeeping.
    const auto callback = at::addThreadLocalCallback(
        at::RecordFunctionCallback([](const at::RecordFunction&) -> std::unique_ptr<at::ObserverContext> {
          return nullptr;
        }));
    const double ns = ns_per(calls, [&] { op.call(a, b, rest...); });
    at::removeCallback(callback);
    return ns;
  }
  TORCH_CHECK(false, "workbook_bench::ns_per_call: `how` must be unboxed, boxed, backend or observed, got '", how, "'");
}

double ns_per_call(const at::Tensor& a, const at::Tensor& b, const std::string& op, const std::string& how,
                   int64_t calls) {
  TORCH_CHECK(calls > 0, "workbook_bench::ns_per_call: `calls` must be positive, got ", calls);
  using Add = at::Tensor(const at::Tensor&, const at::Tensor&);
  if (op == "add") return time_op<Add>("workbook::add", "", a, b, how, calls);
  if (op == "add_") return time_op<at::Tensor&(at::Tensor&, const at::Tensor&)>("workbook::add_", "", a, b, how, calls);
  TORCH_CHECK(op == "aten::add", "workbook_bench::ns_per_call: `op` must be add, add_ or aten::add, got '", op, "'");
  using AtenAdd = at::Tensor(const at::Tensor&, const at::Tensor&, const c10::Scalar&);
  return time_op<AtenAdd>("aten::add", "Tensor", a, b, how, calls, c10::Scalar(1));  // alpha=1, as torch.add passes it
}

}  // namespace

TORCH_LIBRARY(workbook_bench, m) {
  m.def("ns_per_call(Tensor a, Tensor b, str op, str how, int calls) -> float", &ns_per_call);
}
