"""What composing with the PyTorch stack costs, measured in the same run (lesson 06).

    python -m bench.composition        (or: make bench)

- Call overhead: microseconds per call on tiny tensors, where the arithmetic is negligible, for
  torch.add (aten's own), workbook::add (the C++ custom operator, with its Autograd kernel) and
  workbook_py::add (the same operator authored in Python, helpers/python_ops.py).
- vmap: workbook::matmul over a batch of small matrices against one shared matrix, through torch's
  fallback (one call per example) and through helpers/python_ops.py's batching rule (one call), interleaved round
  by round, with a speed-up printed only where it is above the noise (bench/timing.py, as lesson 07 does).
"""

from __future__ import annotations

import torch

from bench.timing import Cost, Spread, interleaved, seconds
from helpers import build, python_ops

LAYERS = ("schemas", "cpu", "meta", "autograd")


def call_overhead() -> dict[str, float]:
    """Microseconds per call of each `add` on two 2x2 float32 tensors."""
    tiny = torch.randn(2, 2)
    calls = {"torch.add (aten)": torch.add, "workbook::add (C++ custom op)": torch.ops.workbook.add,
             "workbook_py::add (Python custom op)": torch.ops.workbook_py.add}
    return {name: seconds(fn, tiny, tiny) * 1e6 for name, fn in calls.items()}


def vmap_millis(batch: int = 512, rows: int = 8, inner: int = 64, cols: int = 64, rounds: int = 9,
                seconds_per_sample: float = 0.05) -> dict[str, list[float]]:
    """Milliseconds per vmapped workbook::matmul of (batch, rows, inner) by (inner, cols), without and with the rule:
    one sample of each per round, interleaved (bench.timing.interleaved), `rounds` rounds.

    The rule is registered for its sample only, so the process is left as it was (if it already had a rule for
    workbook::matmul, both figures use that one).
    """
    lhs, rhs = torch.randn(batch, rows, inner), torch.randn(inner, cols)
    vmapped = torch.vmap(torch.ops.workbook.matmul, in_dims=(0, None))

    def fallback_loop() -> float:
        torch._C._functorch._set_vmap_fallback_warning_enabled(False)  # one line on stderr per fallback call
        try:
            return seconds(vmapped, lhs, rhs, min_sample_time=seconds_per_sample, samples=1) * 1e3
        finally:  # torch has no getter for this switch: back to its default, on
            torch._C._functorch._set_vmap_fallback_warning_enabled(True)

    def batching_rule() -> float:
        rule = python_ops.register_matmul_batching_rule()
        try:
            return seconds(vmapped, lhs, rhs, min_sample_time=seconds_per_sample, samples=1) * 1e3
        finally:
            rule._destroy()

    return interleaved({"fallback loop": fallback_loop, "batching rule": batching_rule}, rounds=rounds)


def speedup(slow: list[float], fast: list[float]) -> str:
    """'14.8x (13.9-15.6x)': slow / fast, round by round, as a median and interquartile range; or 'within noise here'
    when the difference slow - fast, round by round, is not above the noise (bench.timing.Cost)."""
    if not Cost.between(slow, fast).significant:
        return "within noise here"
    ratio = Spread.of([s / f for s, f in zip(slow, fast)])
    return f"{ratio.median:.1f}x ({ratio.q1:.1f}-{ratio.q3:.1f}x)"


def main():
    for layer in LAYERS:
        build.load(layer)
    costs = call_overhead()
    print("call overhead, two 2x2 float32 tensors:")
    for name, micros in costs.items():
        print(f"  {name:38} {micros:6.2f} µs")
    python, cpp = costs["workbook_py::add (Python custom op)"], costs["workbook::add (C++ custom op)"]
    print(f"  Python custom op / C++ custom op: {python / cpp:.1f}x")
    times = vmap_millis()
    print("vmap of workbook::matmul, 512 x (8 x 64) @ (64 x 64), median (interquartile range) over 9 rounds:")
    for name, millis in times.items():
        print(f"  {name:38} {Spread.of(millis):.3f} ms")
    print(f"  the rule is faster by: {speedup(times['fallback loop'], times['batching rule'])}")


if __name__ == "__main__":
    main()
