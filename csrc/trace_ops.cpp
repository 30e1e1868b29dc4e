// Python's window onto trace.h: two operators in their own namespace, so reading the log never
// shows up in it. helpers/trace.py calls them; nothing else should.
#include <torch/library.h>

#include <sstream>

#include "trace.h"

namespace {

void start() {
  auto& log = workbook::trace::log();
  std::lock_guard<std::mutex> guard(log.mutex);
  log.events.clear();
  log.depth = 0;
  log.enabled = true;
}

// Stops recording and returns the events, one per line, fields separated by tabs:
// op, key, keyset, depth, dtypes.
std::string stop() {
  auto& log = workbook::trace::log();
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

}  // namespace

TORCH_LIBRARY(workbook_trace, m) {
  m.def("start() -> ()", &start);
  m.def("stop() -> str", &stop);
}
