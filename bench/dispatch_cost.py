"""What each dispatcher layer costs one call of workbook::add on a tiny tensor, timed from Python and from C++.

    python -m bench.dispatch_cost        (or: make bench)

Every cost is a difference measured in one process, round by round: the same call with the layer and without it
(a dispatch key switched off for the call, an autocast region left, the recorder off, ...), interleaved, so that a
slow moment of the machine hits both sides of a round alike. A cost is reported with its spread (median and
interquartile range over the rounds), and called a cost only where its whole interquartile range is above zero;
otherwise it is "within noise here" (bench/timing.py). The same states are timed from C++
(csrc/bench/dispatch_cost.cpp), where no Python runs between calls: what the dispatcher itself costs, and how much of
a call from Python is Python.

A layer, once loaded, cannot be unloaded. So the measurements come in two stages, in this order, in one process:
torch's own kernels at the Autograd and Autocast keys first (FALLBACK), then the workbook's (OURS, loaded on top).
Lesson 07 runs the same two stages.
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass

import torch

from bench.kernels import machine
from bench.timing import ROUNDS, Cost, Spread, interleaved, micros, micros_timer
from helpers import build, python_ops, trace

FALLBACK = ("schemas", "cpu", "dispatch_bench")
OURS = FALLBACK + ("autograd", "autocast", "ad_inplace_or_view")
NUMEL = 8  # elements per input: the arithmetic is negligible, the call is all that is left


@dataclass(frozen=True)
class State:
    """One way of calling workbook::add (or add_, or aten::add.Tensor) on two 8-element float tensors."""

    op: str = "add"  # workbook's add or add_, or "aten::add" (aten's add.Tensor, alpha=1)
    requires_grad: bool = False
    autocast: bool = False
    recording: bool = False  # csrc/trace.h's recorder on
    exclude: str | None = None  # a dispatch key switched off for the call (what a kernel's guard does)
    how: str = "unboxed"  # from C++: unboxed, boxed, backend or observed (csrc/bench/dispatch_cost.cpp)

    def __str__(self) -> str:
        parts = [f"{self.op}(a, b)"]
        parts += ["a requires grad"] * self.requires_grad + ["in torch.autocast('cpu')"] * self.autocast
        parts += ["recorder on"] * self.recording + [f"{self.exclude} excluded"] * bool(self.exclude)
        parts += [f"C++ {self.how} only"] * (self.how != "unboxed")
        return ", ".join(parts)


@dataclass(frozen=True)
class Layer:
    name: str
    stage: tuple[str, ...]
    on: State
    off: State
    from_python: bool = True  # False: only C++ can switch it (boxing, a RecordFunction observer)


PLAIN = State()
LAYERS = [
    Layer("torch's autograd fallback (AutogradCPU)", FALLBACK, PLAIN, State(exclude="AutogradCPU")),
    Layer("torch's autograd fallback, reached boxed", FALLBACK, State(how="boxed"),
          State(how="boxed", exclude="AutogradCPU"), from_python=False),
    Layer("aten's Autograd kernel (add), recording a node", FALLBACK, State(op="aten::add", requires_grad=True),
          State(op="aten::add")),
    Layer("autocast region, no Autocast kernel (fallthrough)", FALLBACK, State(autocast=True), PLAIN),
    Layer("our Autograd kernel, nothing to record", OURS, PLAIN, State(exclude="AutogradCPU")),
    Layer("our Autograd kernel, recording a graph node", OURS, State(requires_grad=True), PLAIN),
    Layer("our Autocast kernel, in a region", OURS, State(autocast=True), PLAIN),
    Layer("our ADInplaceOrView kernel (add_)", OURS, State(op="add_"), State(op="add_", exclude="ADInplaceOrView")),
    Layer("the trace recorder, on (two kernels record)", OURS, State(recording=True), PLAIN),
    Layer("boxed arguments (callBoxed, as from Python)", OURS, State(how="boxed"), PLAIN, from_python=False),
    Layer("a RecordFunction observer (a profiler)", OURS, State(how="observed"), PLAIN, from_python=False),
]


@dataclass(frozen=True)
class LayerCost:
    layer: str
    python_us: Cost | None  # None: not measurable from Python
    cpp_ns: Cost


def _inputs(state: State) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.ones(NUMEL, requires_grad=state.requires_grad), torch.ones(NUMEL)


def _context(state: State) -> ExitStack:
    stack = ExitStack()
    if state.exclude:
        key = getattr(torch._C.DispatchKey, state.exclude)
        stack.enter_context(torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(key)))
    if state.autocast:
        stack.enter_context(torch.autocast("cpu"))
    if state.recording:
        stack.enter_context(trace.recording())
    return stack


def _python_op(state: State):
    return torch.ops.aten.add.Tensor if state.op == "aten::add" else getattr(torch.ops.workbook, state.op).default


def python_us(state: State, seconds: float) -> float:
    """Microseconds per call of torch.ops.workbook.<op>.default(a, b) (or aten.add.Tensor) from Python, in `state`."""
    a, b = _inputs(state)
    with _context(state):
        return micros(_python_op(state), a, b, min_sample_time=seconds, samples=1)


def cpp_ns(state: State, calls: int) -> float:
    """Nanoseconds per call of the same op from C++ (csrc/bench/dispatch_cost.cpp), in `state`."""
    a, b = _inputs(state)
    with _context(state):
        return torch.ops.workbook_bench.ns_per_call(a, b, state.op, state.how, calls)


def measure(stage: tuple[str, ...], rounds: int = ROUNDS, seconds: float = 0.005,
            calls: int = 20_000) -> list[LayerCost]:
    """Each layer of LAYERS in `stage` (whose layers must be the ones loaded): its call with the layer minus without,
    from Python (µs) and from C++ (ns), round by round."""
    ours_at_autograd = trace.dispatch_table(torch.ops.workbook.add)["AutogradCPU"].ours
    if ours_at_autograd != ("autograd" in stage):
        raise RuntimeError(f"measure({stage}) needs exactly these layers loaded; this process "
                           f"{'has' if ours_at_autograd else 'lacks'} the workbook's Autograd kernels")
    layers = [layer for layer in LAYERS if layer.stage == stage]
    states = list(dict.fromkeys(state for layer in layers for state in (layer.on, layer.off)))
    from_python = {state for layer in layers if layer.from_python for state in (layer.on, layer.off)}
    timers = {}
    for state in states:  # each state from Python (µs), where it can be called so, and from C++ (ns)
        if state in from_python:
            timers[state, "python"] = lambda state=state: python_us(state, seconds)
        timers[state, "cpp"] = lambda state=state: cpp_ns(state, calls)
    samples = interleaved(timers, rounds)
    return [LayerCost(layer.name,
                      Cost.between(samples[layer.on, "python"], samples[layer.off, "python"])
                      if layer.from_python else None,
                      Cost.between(samples[layer.on, "cpp"], samples[layer.off, "cpp"])) for layer in layers]


def call_totals(rounds: int = ROUNDS, seconds: float = 0.005, calls: int = 20_000) -> dict[str, Spread]:
    """The plain call of workbook::add, whole, in µs: from Python, from C++ through every layer, and from C++
    straight to the CPU kernel; aten's add from Python for scale. Run with OURS loaded."""
    return call_parts(rounds, seconds, calls)[0]


def call_parts(rounds: int = ROUNDS, seconds: float = 0.005,
               calls: int = 20_000) -> tuple[dict[str, Spread], dict[str, Cost], Spread]:
    """call_totals(), and from the same rounds, round by round: what the call from Python adds over the call from C++
    (µs), what the dispatcher's layers add over the CPU kernel alone, from C++ (ns), and the first as a share of the
    call from Python."""
    a, b = _inputs(PLAIN)
    samples = interleaved({
        "from Python": micros_timer(torch.ops.workbook.add.default, a, b, seconds=seconds),
        "from C++": lambda: cpp_ns(PLAIN, calls) / 1000,
        "from C++, CPU kernel only": lambda: cpp_ns(State(how="backend"), calls) / 1000,
        "aten's add, from Python": micros_timer(torch.ops.aten.add.Tensor, a, b, seconds=seconds),
    }, rounds)
    python, cpp, kernel = (samples[name] for name in ("from Python", "from C++", "from C++, CPU kernel only"))
    differences = {
        "the call from Python, over the call from C++": Cost.between(python, cpp),
        "the dispatcher's layers, over the CPU kernel alone (C++)": Cost.between([t * 1000 for t in cpp],
                                                                                  [t * 1000 for t in kernel]),
    }
    python_share = Spread.of([1 - c / p for p, c in zip(python, cpp)])
    return Spread.each(samples), differences, python_share


ENTRY_POINTS = ["torch.add", "torch.ops.aten.add.Tensor", "torch.ops.aten.add", "torch.ops.workbook.add.default",
                "torch.ops.workbook.add"]
# The two CPU kernels alone, reached from C++ by a redispatch to the CPU key (csrc/bench/dispatch_cost.cpp's "backend").
KERNELS_ALONE = {"aten::add's CPU kernel, from C++": "aten::add", "workbook::add's CPU kernel, from C++": "add"}
# (what the difference is, the slower entry point, the faster one)
ENTRY_DIFFERENCES = [("the generic OpOverload path, over aten's generated binding", "torch.ops.aten.add.Tensor", "torch.add"),
                     ("picking the overload from the packet (aten)", "torch.ops.aten.add", "torch.ops.aten.add.Tensor"),
                     ("picking the overload from the packet (workbook)", "torch.ops.workbook.add",
                      "torch.ops.workbook.add.default"),
                     ("aten's CPU kernel (TensorIterator), over the workbook's loop",
                      "aten::add's CPU kernel, from C++", "workbook::add's CPU kernel, from C++")]


def entry_points(rounds: int = ROUNDS, seconds: float = 0.005,
                 calls: int = 20_000) -> tuple[dict[str, Spread], dict[str, Cost]]:
    """µs per call of add through each Python entry point, and of the two CPU kernels alone from C++ (needs the
    dispatch_bench layer); and the differences of ENTRY_DIFFERENCES, round by round."""
    a, b = torch.ones(NUMEL), torch.ones(NUMEL)
    timers = {name: micros_timer(eval(name, {"torch": torch}), a, b, seconds=seconds)  # noqa: S307 - names above
              for name in ENTRY_POINTS}
    for name, op in KERNELS_ALONE.items():
        timers[name] = lambda op=op: cpp_ns(State(op=op, how="backend"), calls) / 1000
    samples = interleaved(timers, rounds)
    return (Spread.each(samples),
            {what: Cost.between(samples[slower], samples[faster]) for what, slower, faster in ENTRY_DIFFERENCES})


def python_op_parts(rounds: int = ROUNDS,
                    seconds: float = 0.005) -> tuple[dict[str, Spread], dict[str, Cost]]:
    """Where a call of a Python custom operator (helpers/python_ops.py's workbook_py::add) goes, in µs: its body alone,
    the dispatcher calling into it with autograd off (inference_mode), the whole call, and, where torch has it
    (2.14 and later), the whole call without custom_op's fast path into Python kernels; and the differences."""
    op = torch.ops.workbook_py.add.default
    a, b = torch.ones(NUMEL), torch.ones(NUMEL)
    fast_path = hasattr(op, "_is_pyobj_dispatcher_enabled") and op._is_pyobj_dispatcher_enabled()
    def in_inference_mode():
        with torch.inference_mode():
            return micros(op, a, b, min_sample_time=seconds, samples=1)

    def without_fast_path():
        op._enable_pyobj_dispatch(False)
        try:
            return micros(op, a, b, min_sample_time=seconds, samples=1)
        finally:
            op._enable_pyobj_dispatch(True)

    timers = {"body alone": micros_timer(python_ops.add._init_fn, a, b, seconds=seconds),
              "dispatched, no autograd": in_inference_mode,
              "whole call": micros_timer(op, a, b, seconds=seconds)}
    if fast_path:
        timers["whole call, no fast path"] = without_fast_path
    samples = interleaved(timers, rounds)
    steps = [("the dispatcher calling into Python", "dispatched, no autograd", "body alone"),
             ("custom_op's autograd wrapper, and autograd in the body", "whole call", "dispatched, no autograd")]
    if fast_path:
        steps.append(("turning the fast path off (PyObject dispatch, torch 2.14)", "whole call, no fast path",
                      "whole call"))
    return (Spread.each(samples),
            {what: Cost.between(samples[slower], samples[faster]) for what, slower, faster in steps})


# One function per backend: Dynamo keeps its compiled code on the function's code object, so each backend gets a code
# object of its own. Each backend adds one stage to the one above it (Inductor replaces aot_eager's FX graph).
COMPILE_LADDER = {
    'backend="eager": Dynamo, the graph run by FX': ("eager", lambda a, b: torch.ops.workbook.add(a, b)),
    'backend="aot_eager": and AOTAutograd': ("aot_eager", lambda a, b: torch.ops.workbook.add(a, b)),
    'backend="inductor" (the default)': ("inductor", lambda a, b: torch.ops.workbook.add(a, b)),
}


def compiled_call_parts(rounds: int = ROUNDS,
                        seconds: float = 0.005) -> tuple[dict[str, Spread], dict[str, Cost]]:
    """One call of workbook::add on two 8-element tensors, eager and through torch.compile with each backend of
    COMPILE_LADDER (fullgraph; needs the meta layer), in µs, and Dynamo's guard check alone, timed from Python
    through torch._dynamo.eval_frame._debug_get_cache_entry_list (private); and the differences, round by round."""
    a, b = _inputs(PLAIN)
    timers = {"eager call": micros_timer(torch.ops.workbook.add.default, a, b, seconds=seconds)}
    for name, (backend, fn) in COMPILE_LADDER.items():
        compiled = torch.compile(fn, fullgraph=True, backend=backend)
        compiled(a, b)  # compiles
        timers[name] = micros_timer(compiled, a, b, seconds=seconds)
    (entry,) = torch._dynamo.eval_frame._debug_get_cache_entry_list(fn)  # the inductor variant's one compiled entry
    timers["Dynamo's guard check alone"] = micros_timer(entry.guard_manager.check, {"a": a, "b": b}, seconds=seconds)
    samples = interleaved(timers, rounds)
    eager_backend, aot_eager, inductor = COMPILE_LADDER
    steps = [("Dynamo (its wrapper and the guard check) and the FX graph", eager_backend, "eager call"),
             ("AOTAutograd's runtime wrappers", aot_eager, eager_backend),
             ("Inductor's generated code, instead of aot_eager's FX graph", inductor, aot_eager)]
    return (Spread.each(samples),
            {what: Cost.between(samples[slower], samples[faster]) for what, slower, faster in steps})


def print_layers(costs: list[LayerCost]) -> None:
    print(f"{'layer':50} {'from Python':>26} {'from C++':>22}")
    for cost in costs:
        python = cost.python_us.describe("µs") if cost.python_us else "-"
        print(f"{cost.layer:50} {python:>26} {cost.cpp_ns.describe('ns', digits=0):>22}")


def main(rounds: int = 15) -> None:
    print(machine())
    print(f"one call of workbook::add on two {NUMEL}-element float32 tensors; a cost is the call with the layer minus "
          f"without, in one process, median (interquartile range) over {rounds} interleaved rounds\n")
    build.load_all(*FALLBACK)
    times, differences = entry_points(rounds)
    print("Python entry points:")
    for name, spread in times.items():
        print(f"  {name:60} {spread:6.2f} µs")
    for what, cost in differences.items():
        print(f"  {what:60} {cost.describe('µs')}")
    costs = measure(FALLBACK, rounds)
    build.load_all(*OURS)
    costs += measure(OURS, rounds)
    print()
    print_layers(costs)
    print("\nthe whole call:")
    for name, spread in call_totals(rounds).items():
        print(f"  {name:28} {spread:6.2f} µs")
    print("\nworkbook_py::add, a Python custom operator:")
    times, differences = python_op_parts(rounds)
    for name, spread in times.items():
        print(f"  {name:60} {spread:6.2f} µs")
    for what, cost in differences.items():
        print(f"  {what:60} {cost.describe('µs')}")


if __name__ == "__main__":
    main()
