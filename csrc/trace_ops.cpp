// The trace log (one per process; see trace.h) and Python's window onto it, in a namespace of their
// own so that reading the log never shows up in it. helpers/trace.py calls them; nothing else should.
//
// To trace your own operators, compile this file into your extension beside your kernels (README,
// "Using this in your own project"). If another library already registered the recorder (the
// workbook's, or a second copy of yours), this one registers nothing and trace.h finds the first.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <sstream>

#include "trace.h"

namespace {

workbook::trace::Log& the_log() {
  static workbook::trace::Log instance;
  return instance;
}

// How trace.h's log() finds the_log() from any library compiled with the same layout of it.
int64_t log_address(int64_t layout) {
  TORCH_CHECK(layout == workbook::trace::kLogLayout, "workbook_trace::log_address: a library compiled with trace.h's ",
              "log layout ", layout, " asked for the log, which has layout ", workbook::trace::kLogLayout,
              " (that of the library that registered the recorder first). Rebuild both from the same csrc/trace.h.");
  return reinterpret_cast<int64_t>(&the_log());
}

void start() {
  auto& log = the_log();
  std::lock_guard<std::mutex> guard(log.mutex);
  log.events.clear();
  log.depth = 0;
  log.enabled = true;
}

// Stops recording and returns the events, one per line, fields separated by tabs:
// op, key, keyset, depth, dtypes.
std::string stop() {
  auto& log = the_log();
  std::lock_guard<std::mutex> guard(log.mutex);
  log.enabled = false;
  std::ostringstream out;
  for (const auto& e : log.events) {
    out << e.op << '\t' << c10::toString(e.key) << '\t' << c10::toString(e.keyset) << '\t'
        << e.depth << '\t' << e.dtypes << '\n';
  }
  log.events.clear();
  return out.str();
}

// What TORCH_LIBRARY(workbook_trace, m) does, unless the namespace is already there: a second
// TORCH_LIBRARY for it would abort the process.
const bool registered_here = [] {
  if (c10::Dispatcher::singleton().findSchema({"workbook_trace::log_address", ""}).has_value()) return false;
  static torch::Library m(torch::Library::DEF, "workbook_trace", std::nullopt, __FILE__, __LINE__);
  m.def("start() -> ()", &start);
  m.def("stop() -> str", &stop);
  m.def("log_address(int layout) -> int", &log_address);
  return true;
}();

}  // namespace
