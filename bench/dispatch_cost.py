"""What each dispatcher layer adds to one call on tiny tensors, as ratios to aten's add in the same process.

    python -m bench.dispatch_cost        (or: make bench)

A loaded layer cannot be unloaded, so each set of layers is measured in a fresh process that loads
only those (configurations that differ only in state share one). Every process times
torch.ops.aten.add.Tensor on the same inputs, in the same state (requires_grad, autocast), and each
figure is reported beside it: a ratio travels between machines and runs, a microsecond figure does
not. Timings: micros() below. The recorder of csrc/trace.h is off unless a configuration turns it on.
"""

from __future__ import annotations

import json
import statistics
import sys
from dataclasses import dataclass

from torch.utils.benchmark import Timer

from bench.kernels import machine
from helpers import isolated


def micros(fn, *args, seconds: float = 0.1) -> float:
    """Median microseconds per call of fn(*args), from torch.utils.benchmark's blocked_autorange."""
    return Timer("fn(*args)", globals={"fn": fn, "args": args}).blocked_autorange(min_run_time=seconds).median * 1e6


@dataclass(frozen=True)
class Config:
    name: str
    layers: tuple[str, ...]
    requires_grad: bool = False
    autocast: bool = False
    recording: bool = False
    python_op: bool = False  # time helpers/python_ops.py's workbook_py::add instead of workbook::add
    in_place: bool = False  # time add_ (against aten's add_), the operator an ADInplaceOrView kernel serves


CONFIGS = [
    Config("CPU kernel; torch's autograd fallback above it", ("schemas", "cpu")),
    Config("+ Autograd kernel (torch::autograd::Function)", ("schemas", "cpu", "autograd")),
    Config("+ Autograd kernel, input requires_grad", ("schemas", "cpu", "autograd"), requires_grad=True),
    Config("+ autocast region, no Autocast kernel (fallthrough)", ("schemas", "cpu", "autograd"), autocast=True),
    Config("+ Autocast kernel, outside a region", ("schemas", "cpu", "autograd", "autocast")),
    Config("+ Autocast kernel, inside a region", ("schemas", "cpu", "autograd", "autocast"), autocast=True),
    Config("+ Autograd kernel, recorder on", ("schemas", "cpu", "autograd"), recording=True),
    Config("in-place add_: torch's ADInplaceOrView fallthrough", ("schemas", "cpu", "autograd"), in_place=True),
    Config("in-place add_: + our ADInplaceOrView kernel", ("schemas", "cpu", "autograd", "ad_inplace_or_view"),
           in_place=True),
    Config("Python custom op (torch.library.custom_op)", ("schemas", "cpu"), python_op=True),
]

CHILD = """
import json, torch
from bench.dispatch_cost import micros
from helpers import build, python_ops
build.load_all(*{layers})
results = []
for python_op, in_place, requires_grad, autocast, recording in {states}:
    ours = torch.ops.workbook_py.add.default if python_op else torch.ops.workbook.add.default
    aten = torch.ops.aten.add.Tensor
    if in_place:
        ours, aten = torch.ops.workbook.add_.default, torch.ops.aten.add_.Tensor
    a, b = torch.ones({numel}, requires_grad=requires_grad), torch.ones({numel})
    torch.set_autocast_enabled("cpu", autocast)
    if recording:
        torch.ops.workbook_trace.start()
    rounds = [(micros(ours, a, b, seconds={seconds}), micros(aten, a, b, seconds={seconds})) for _ in range({rounds})]
    results.append(rounds)  # interleaved: a slow moment of the machine hits both calls of a round
    if recording:
        torch.ops.workbook_trace.stop()
    torch.set_autocast_enabled("cpu", False)
print(json.dumps(results))
"""

ENTRY = """
import json, torch
from bench.dispatch_cost import micros
from helpers import build
build.load_all("schemas", "cpu", "autograd")
a, b = torch.ones({numel}), torch.ones({numel})
calls = {{"torch.add": torch.add, "torch.ops.aten.add.Tensor (overload)": torch.ops.aten.add.Tensor,
         "torch.ops.aten.add (packet)": torch.ops.aten.add, "torch.ops.workbook.add.default": torch.ops.workbook.add.default,
         "torch.ops.workbook.add (packet)": torch.ops.workbook.add}}
print(json.dumps({{name: micros(op, a, b, seconds={seconds}) for name, op in calls.items()}}))
"""


def _run(code: str) -> object:
    done = isolated.run(code)
    if done.returncode != 0:
        raise RuntimeError(f"a measuring process failed (rc {done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure_all(configs: list[Config], numel: int = 8, seconds: float = 0.1, rounds: int = 7) -> list[dict]:
    """Each configuration: microseconds per call of ours and of aten's add, and their ratio, each the
    median over `rounds` interleaved rounds. Configurations that load the same layers share one
    process (one import of torch)."""
    rows: dict[Config, dict] = {}
    for layers in dict.fromkeys(config.layers for config in configs):
        group = [config for config in configs if config.layers == layers]
        states = [(c.python_op, c.in_place, c.requires_grad, c.autocast, c.recording) for c in group]
        results = _run(CHILD.format(layers=layers, states=states, numel=numel, seconds=seconds, rounds=rounds))
        for config, rounds_us in zip(group, results):
            # The ratio is taken round by round, for the reason above.
            rows[config] = {"config": config.name, "ours us": statistics.median(r[0] for r in rounds_us),
                            "aten us": statistics.median(r[1] for r in rounds_us),
                            "ratio": statistics.median(r[0] / r[1] for r in rounds_us)}
    return [rows[config] for config in configs]


def measure(config: Config, **options) -> dict:
    return measure_all([config], **options)[0]


def entry_points(numel: int = 8, seconds: float = 0.2) -> dict[str, float]:
    """Microseconds per call of the same add through each Python entry point."""
    return _run(ENTRY.format(numel=numel, seconds=seconds))


def main(seconds: float = 0.1, rounds: int = 7) -> None:
    print(machine())
    print("one call of add on two 8-element float32 tensors; ratio = ours / torch.ops.aten.add.Tensor, same process\n")
    print("Python entry points (one process):")
    for name, value in entry_points(seconds=seconds).items():
        print(f"  {name:40} {value:6.2f} us")
    print(f"\n{'configuration':50} {'ours us':>8} {'aten us':>8} {'ratio':>6}")
    rows = measure_all(CONFIGS, seconds=seconds, rounds=rounds)
    for row in rows:
        print(f"{row['config']:50} {row['ours us']:8.2f} {row['aten us']:8.2f} {row['ratio']:6.2f}")
    by_name = {row["config"]: row for row in rows}
    goal = by_name["+ Autograd kernel (torch::autograd::Function)"]["ratio"]
    print(f"\ngoal (issue 12): workbook::add with its Autograd kernel, recorder off, <= 1.1x aten: "
          f"{goal:.2f}x, {'met' if goal <= 1.1 else 'NOT MET'}")


if __name__ == "__main__":
    main(*(float(arg) for arg in sys.argv[1:2]))
