"""What composing with the PyTorch stack costs, measured in the same run (lesson 06).

    python -m bench.composition        (or: make bench)

- Call overhead: microseconds per call on tiny tensors, where the arithmetic is negligible, for
  torch.add (aten's own), workbook::add (the C++ custom operator, with its Autograd kernel) and
  workbook_py::add (the same operator authored in Python, helpers/python_ops.py).
- vmap: workbook::matmul over a batch of small matrices against one shared matrix, through torch's
  fallback (one call per example) and through helpers/python_ops.py's batching rule (one call).
"""

from __future__ import annotations

import torch

from bench.timing import seconds
from helpers import build, python_ops

LAYERS = ("schemas", "cpu", "meta", "autograd")


def call_overhead() -> dict[str, float]:
    """Microseconds per call of each `add` on two 2x2 float32 tensors."""
    tiny = torch.randn(2, 2)
    calls = {"torch.add (aten)": torch.add, "workbook::add (C++ custom op)": torch.ops.workbook.add,
             "workbook_py::add (Python custom op)": torch.ops.workbook_py.add}
    return {name: seconds(fn, tiny, tiny) * 1e6 for name, fn in calls.items()}


def vmap_seconds(batch: int = 512, rows: int = 8, inner: int = 64, cols: int = 64) -> dict[str, float]:
    """Seconds per vmapped workbook::matmul of (batch, rows, inner) by (inner, cols), without and with the rule.

    The rule is registered for the second measurement only, so the process is left as it was (if it
    already had a rule for workbook::matmul, both figures use that one).
    """
    lhs, rhs = torch.randn(batch, rows, inner), torch.randn(inner, cols)
    vmapped = torch.vmap(torch.ops.workbook.matmul, in_dims=(0, None))
    torch._C._functorch._set_vmap_fallback_warning_enabled(False)  # one line on stderr per fallback call
    try:
        results = {"fallback loop": seconds(vmapped, lhs, rhs)}
    finally:
        torch._C._functorch._set_vmap_fallback_warning_enabled(True)
    rule = python_ops.register_matmul_batching_rule()
    try:
        results["batching rule"] = seconds(vmapped, lhs, rhs)
    finally:
        rule._destroy()
    return results


def main():
    for layer in LAYERS:
        build.load(layer)
    costs = call_overhead()
    print("call overhead, two 2x2 float32 tensors:")
    for name, micros in costs.items():
        print(f"  {name:38} {micros:6.2f} µs")
    python, cpp = costs["workbook_py::add (Python custom op)"], costs["workbook::add (C++ custom op)"]
    print(f"  Python custom op / C++ custom op: {python / cpp:.1f}x")
    times = vmap_seconds()
    print("vmap of workbook::matmul, 512 x (8 x 64) @ (64 x 64):")
    for name, secs in times.items():
        print(f"  {name:38} {secs * 1e3:6.3f} ms")
    print(f"  fallback loop / batching rule: {times['fallback loop'] / times['batching rule']:.1f}x")


if __name__ == "__main__":
    main()
