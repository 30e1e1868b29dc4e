// A header-only recorder of the dispatcher's path. A kernel records itself in one line:
//
//     workbook::trace::Scope scope("add", ks, self, other);
//
// where `ks` is the c10::DispatchKeySet the kernel received as its first argument. The
// dispatcher hands each kernel the keyset it dispatched on, so the highest-priority key in
// `ks` is the key this kernel was picked for (under torch's Python dispatcher, the top key but
// PythonDispatcher: see Scope). The event keeps (operator, that key, the whole keyset, nesting
// depth, argument dtypes). Nesting: a Scope lives until the kernel returns, so
// a kernel that redispatches sees the next kernel record at depth + 1.
//
// One log per process, owned by trace_ops.cpp's library. Every other extension library that
// includes this header (cpu.cpp's, autograd.cpp's, ...) finds it through the dispatcher, the one
// registry all of them share: trace_ops.cpp registers an operator that returns the log's address.
// (A static object in this header would be one per library under clang: only g++ merges them,
// by marking them STB_GNU_UNIQUE.) Libraries compiled from different versions of this header would
// read one Log with two layouts: the address is handed out only to a caller of the same kLogLayout.
// trace_ops.cpp also exposes the log to Python. Recording is off
// until Python turns it on (then a Scope costs one atomic load), and it is meant for one call at a
// time: depth is counted per process, not per thread.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/DispatchKeySet.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

namespace workbook::trace {

// Raise it whenever Event or Log changes.
constexpr int64_t kLogLayout = 1;

struct Event {
  std::string op;
  c10::DispatchKey key;
  c10::DispatchKeySet keyset;
  int depth;
  std::string dtypes;  // e.g. "Float,Float"
};

struct Log {
  std::mutex mutex;
  std::vector<Event> events;
  std::atomic<bool> enabled{false};  // read without the mutex: a Scope costs one load while recording is off
  int depth = 0;
};

inline Log& log() {
  static Log* const instance = [] {
    // A TorchDispatchMode active at the first Scope of a library would see this call at the Python key: excluding
    // that key (and PythonTLSSnapshot, which leads to it) keeps the recorder out of what modes see (lesson 10).
    c10::impl::ExcludeDispatchKeyGuard unseen_by_modes(
        c10::DispatchKeySet({c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot}));
    return reinterpret_cast<Log*>(c10::Dispatcher::singleton()
                                      .findSchemaOrThrow("workbook_trace::log_address", "")
                                      .typed<int64_t(int64_t)>()
                                      .call(kLogLayout));
  }();
  return *instance;
}

class Scope {
 public:
  template <typename... Tensors>
  Scope(const char* op, c10::DispatchKeySet ks, const Tensors&... args) {
    Log& l = log();
    if (!l.enabled.load(std::memory_order_relaxed)) return;  // the switch: off, nothing else runs
    std::lock_guard<std::mutex> guard(l.mutex);
    if (!l.enabled) return;
    recording_ = true;
    std::string dtypes;
    ((dtypes += (dtypes.empty() ? "" : ",") + std::string(c10::toString(args.scalar_type()))), ...);
    // The kernel's own key: the keyset's top one, but for PythonDispatcher. Under torch's Python dispatcher
    // (torch.compile's and export's tracing) each kernel is called with a keyset computed again from the arguments
    // and the thread's include and exclude sets (Dispatcher::callBoxedForDispatchKey): it holds PythonDispatcher,
    // and the kernel's own key on top of the rest where every kernel above excluded its key, as torch's generated
    // autograd kernels and the workbook's do.
    const c10::DispatchKey key = ks.remove(c10::DispatchKey::PythonDispatcher).highestPriorityTypeId();
    l.events.push_back({op, key, ks, l.depth++, std::move(dtypes)});
  }
  ~Scope() {
    if (!recording_) return;
    Log& l = log();
    std::lock_guard<std::mutex> guard(l.mutex);
    --l.depth;
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  bool recording_ = false;
};

}  // namespace workbook::trace
