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
from bench.timing import Cost, Spread, micros
from helpers import build, python_ops, trace

FALLBACK = ("schemas", "cpu", "dispatch_bench")
OURS = FALLBACK + ("autograd", "autocast", "ad_inplace_or_view")
NUMEL = 8  # elements per input: the arithmetic is negligible, the call is all that is left


@dataclass(frozen=True)
class State:
    """One way of calling workbook::add (or add_) on two 8-element float tensors."""

    op: str = "add"
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


def python_us(state: State, seconds: float) -> float:
    """Microseconds per call of torch.ops.workbook.<op>.default(a, b) from Python, in `state`."""
    a, b = _inputs(state)
    with _context(state):
        return micros(getattr(torch.ops.workbook, state.op).default, a, b, min_sample_time=seconds, samples=1)


def cpp_ns(state: State, calls: int) -> float:
    """Nanoseconds per call of the same op from C++ (csrc/bench/dispatch_cost.cpp), in `state`."""
    a, b = _inputs(state)
    with _context(state):
        return torch.ops.workbook_bench.ns_per_call(a, b, state.op, state.how, calls)


def measure(stage: tuple[str, ...], rounds: int = 9, seconds: float = 0.005, calls: int = 20_000) -> list[LayerCost]:
    """Each layer of LAYERS in `stage` (whose layers must be the ones loaded): its call with the layer minus without,
    from Python (µs) and from C++ (ns), round by round."""
    ours_at_autograd = trace.dispatch_table(torch.ops.workbook.add)["AutogradCPU"].ours
    if ours_at_autograd != ("autograd" in stage):
        raise RuntimeError(f"measure({stage}) needs exactly these layers loaded; this process "
                           f"{'has' if ours_at_autograd else 'lacks'} the workbook's Autograd kernels")
    layers = [layer for layer in LAYERS if layer.stage == stage]
    states = list(dict.fromkeys(state for layer in layers for state in (layer.on, layer.off)))
    from_python = {state for layer in layers if layer.from_python for state in (layer.on, layer.off)}
    python = {state: [] for state in states}
    cpp = {state: [] for state in states}
    for _ in range(rounds):
        for state in states:
            if state in from_python:
                python[state].append(python_us(state, seconds))
            cpp[state].append(cpp_ns(state, calls))
    return [LayerCost(layer.name,
                      Cost.between(python[layer.on], python[layer.off]) if layer.from_python else None,
                      Cost.between(cpp[layer.on], cpp[layer.off])) for layer in layers]


def call_totals(rounds: int = 9, seconds: float = 0.005, calls: int = 20_000) -> dict[str, Spread]:
    """The plain call of workbook::add, whole, in µs: from Python, from C++ through every layer, and from C++
    straight to the CPU kernel; aten's add from Python for scale. Run with OURS loaded."""
    a, b = _inputs(PLAIN)
    samples = {"from Python": [], "from C++": [], "from C++, CPU kernel only": [], "aten's add, from Python": []}
    for _ in range(rounds):
        samples["from Python"].append(micros(torch.ops.workbook.add.default, a, b, min_sample_time=seconds, samples=1))
        samples["from C++"].append(cpp_ns(PLAIN, calls) / 1000)
        samples["from C++, CPU kernel only"].append(cpp_ns(State(how="backend"), calls) / 1000)
        samples["aten's add, from Python"].append(micros(torch.ops.aten.add.Tensor, a, b, min_sample_time=seconds,
                                                          samples=1))
    return {name: Spread.of(values) for name, values in samples.items()}


ENTRY_POINTS = ["torch.add", "torch.ops.aten.add.Tensor", "torch.ops.aten.add", "torch.ops.workbook.add.default",
                "torch.ops.workbook.add"]
# (what the difference is, the slower entry point, the faster one)
ENTRY_DIFFERENCES = [("the generic OpOverload path, over aten's generated binding", "torch.ops.aten.add.Tensor", "torch.add"),
                     ("picking the overload from the packet (aten)", "torch.ops.aten.add", "torch.ops.aten.add.Tensor"),
                     ("picking the overload from the packet (workbook)", "torch.ops.workbook.add",
                      "torch.ops.workbook.add.default")]


def entry_points(rounds: int = 9, seconds: float = 0.005) -> tuple[dict[str, Spread], dict[str, Cost]]:
    """µs per call of add through each Python entry point, and the differences of ENTRY_DIFFERENCES."""
    calls = {name: eval(name, {"torch": torch}) for name in ENTRY_POINTS}  # noqa: S307 - our own names above
    a, b = torch.ones(NUMEL), torch.ones(NUMEL)
    samples = {name: [] for name in calls}
    for _ in range(rounds):
        for name, fn in calls.items():
            samples[name].append(micros(fn, a, b, min_sample_time=seconds, samples=1))
    return ({name: Spread.of(values) for name, values in samples.items()},
            {what: Cost.between(samples[slower], samples[faster]) for what, slower, faster in ENTRY_DIFFERENCES})


def python_op_parts(rounds: int = 9, seconds: float = 0.005) -> tuple[dict[str, Spread], dict[str, Cost]]:
    """Where a call of a Python custom operator (helpers/python_ops.py's workbook_py::add) goes, in µs: its body alone,
    the dispatcher calling into it with autograd off (inference_mode), the whole call, and, where torch has it
    (2.14 and later), the whole call without custom_op's fast path into Python kernels; and the differences."""
    op = torch.ops.workbook_py.add.default
    a, b = torch.ones(NUMEL), torch.ones(NUMEL)
    fast_path = hasattr(op, "_is_pyobj_dispatcher_enabled") and op._is_pyobj_dispatcher_enabled()
    samples = {"body alone": [], "dispatched, no autograd": [], "whole call": []}
    if fast_path:
        samples["whole call, no fast path"] = []
    for _ in range(rounds):
        samples["body alone"].append(micros(python_ops.add._init_fn, a, b, min_sample_time=seconds, samples=1))
        with torch.inference_mode():
            samples["dispatched, no autograd"].append(micros(op, a, b, min_sample_time=seconds, samples=1))
        samples["whole call"].append(micros(op, a, b, min_sample_time=seconds, samples=1))
        if fast_path:
            op._enable_pyobj_dispatch(False)
            try:
                samples["whole call, no fast path"].append(micros(op, a, b, min_sample_time=seconds, samples=1))
            finally:
                op._enable_pyobj_dispatch(True)
    steps = [("the dispatcher calling into Python", "dispatched, no autograd", "body alone"),
             ("custom_op's autograd wrapper", "whole call", "dispatched, no autograd")]
    if fast_path:
        steps.append(("turning the fast path off (PyObject dispatch, torch 2.14)", "whole call, no fast path",
                      "whole call"))
    return ({name: Spread.of(values) for name, values in samples.items()},
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
