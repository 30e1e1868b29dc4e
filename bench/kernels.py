"""Throughput of the workbook's CPU kernels against PyTorch's own, measured in the same run.

    python -m bench.kernels            (or: make bench)
    ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 python -m bench.kernels   (AVX2 on an AVX-512 machine)

- sum: GB/s of input read, for workbook::sum and torch.sum, beside a memory copy of the same bytes
  (a reference, not a ceiling: a copy reads and writes each byte once, counted as 2 x bytes / time;
  a sum only reads, and can go faster).
- matmul: GFLOP/s (2 n^3 / time) for workbook::matmul and torch.matmul (a tuned BLAS).
Each figure is the median of several timed samples after warm-up calls; both sides use the same
threads (torch.get_num_threads()). The speed goals (GOALS) are judged on ratios measured in interleaved
rounds (workbook, torch, workbook, torch, ...), so that a slow moment of a shared machine hits both.
"""

from __future__ import annotations

import os
import platform
import re
import resource
import statistics

import torch

from bench.timing import seconds
from helpers import build, toolchain

SUM_SIZES = [1 << 10, 1 << 14, 1 << 18, 1 << 22, 1 << 24]
MATMUL_SIZES = [64, 256, 512, 1024]

# (what, dtype, size, minimum ratio torch time / workbook time)
GOALS = [
    ("sum", torch.float32, 1 << 24, 0.9),
    ("sum", torch.float32, 1 << 18, 0.9),
    ("sum", torch.int32, 1 << 24, 10.0),
    ("matmul", torch.float32, 1024, 0.6),
    ("matmul", torch.float64, 1024, 0.6),
]


def sample(dtype: torch.dtype, shape) -> torch.Tensor:
    if dtype.is_floating_point:
        return torch.randn(shape, dtype=dtype)
    return torch.randint(-100, 100, shape, dtype=dtype)


def sum_rows(dtypes=(torch.float32, torch.int32), sizes=SUM_SIZES, min_sample_time: float = 0.05) -> list[dict]:
    rows = []
    for dtype in dtypes:
        for n in sizes:
            x = sample(dtype, (n,))
            copy_target = torch.empty_like(x)
            ours = seconds(torch.ops.workbook.sum, x, min_sample_time=min_sample_time)
            theirs = seconds(torch.sum, x, min_sample_time=min_sample_time)
            copy = seconds(copy_target.copy_, x, min_sample_time=min_sample_time)
            rows.append({"op": "sum", "dtype": str(dtype).removeprefix("torch."), "size": n,
                         "workbook GB/s": x.nbytes / ours / 1e9, "torch GB/s": x.nbytes / theirs / 1e9,
                         "copy GB/s": 2 * x.nbytes / copy / 1e9, "ratio": theirs / ours,
                         "of copy": (x.nbytes / ours) / (2 * x.nbytes / copy)})
    return rows


def matmul_rows(dtypes=(torch.float32, torch.float64), sizes=MATMUL_SIZES, min_sample_time: float = 0.05) -> list[dict]:
    rows = []
    for dtype in dtypes:
        for n in sizes:
            a, b = sample(dtype, (n, n)), sample(dtype, (n, n))
            ours = seconds(torch.ops.workbook.matmul, a, b, min_sample_time=min_sample_time)
            theirs = seconds(torch.matmul, a, b, min_sample_time=min_sample_time)
            rows.append({"op": "matmul", "dtype": str(dtype).removeprefix("torch."), "size": n,
                         "workbook GFLOP/s": 2 * n**3 / ours / 1e9, "torch GFLOP/s": 2 * n**3 / theirs / 1e9,
                         "ratio": theirs / ours})
    return rows


def page_faults_per_call(fn, calls: int = 5) -> float:
    """Minor page faults per call of fn(): pages the process wrote or read for the first time since the operating
    system handed them over (each one traps into the kernel, which maps a zeroed page). resource.getrusage: Unix."""
    fn()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(calls):
        fn()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / calls


def widening_rows(sizes=(1 << 20, 1 << 24), min_sample_time: float = 0.05) -> list[dict]:
    """torch.sum of int32 (an int64 result) beside the steps torch takes for it: ATen's reductions convert the input to
    the result's dtype first (make_reduction_from_out_ty in ATen/native/ReduceOpsUtils.h calls self.to(kLong)), then
    sum. Each step timed, with the memory it faults in per call: `wide.copy_(x)` is the same conversion into a tensor
    that already exists."""
    rows = []
    for n in sizes:
        x = sample(torch.int32, (n,))
        wide = torch.empty(n, dtype=torch.int64)
        steps = {"torch.sum(x)": lambda: torch.sum(x), "x.to(int64)": lambda: x.to(torch.int64),
                 "wide.copy_(x)": lambda: wide.copy_(x), "torch.sum(wide)": lambda: torch.sum(wide)}
        for name, step in steps.items():
            faults = page_faults_per_call(step)
            milliseconds = seconds(step, min_sample_time=min_sample_time) * 1e3
            rows.append({"elements": n, "step": name, "ms per call": milliseconds, "page faults": round(faults),
                         "MB faulted in": faults * resource.getpagesize() / 2**20})
    return rows


def goal_rows(rounds: int = 5) -> list[dict]:
    """Each goal's ratio as the median over `rounds` interleaved rounds (ours, then torch's, each round)."""
    rows = []
    for op, dtype, size, goal in GOALS:
        args = (sample(dtype, (size,)),) if op == "sum" else (sample(dtype, (size, size)), sample(dtype, (size, size)))
        ours_fn, theirs_fn = getattr(torch.ops.workbook, op), getattr(torch, op)
        ratios = [seconds(theirs_fn, *args, samples=3) / seconds(ours_fn, *args, samples=3) for _ in range(rounds)]
        ratio = statistics.median(ratios)
        rows.append({"goal": f"{op} {str(dtype).removeprefix('torch.')} {size}", "ratio": ratio,
                     "spread": f"{min(ratios):.2f}-{max(ratios):.2f}", "wanted": f">= {goal}",
                     "met": "met" if ratio >= goal else "NOT MET"})
    return rows


def machine() -> str:
    """The CPU model, its capability as torch sees it, cores and threads: every figure depends on them."""
    model = platform.processor() or platform.machine()
    if os.path.exists("/proc/cpuinfo"):
        names = [line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")]
        model = names[0] if names else model
    return (f"CPU: {model}; torch CPU capability: {torch.backends.cpu.get_cpu_capability()}; "
            f"cores: {os.cpu_count()}; threads: {torch.get_num_threads()}")


def blas() -> str:
    """The BLAS library torch was built with (torch.matmul on CPU calls it): BLAS_INFO in torch.__config__.show()."""
    found = re.search(r"BLAS_INFO=(\w+)", torch.__config__.show())
    return found.group(1) if found else "unknown"


def print_table(rows: list[dict]) -> None:
    columns = list(rows[0])
    print("  ".join(f"{c:>16}" for c in columns))
    for row in rows:
        print("  ".join(f"{v:>16.2f}" if isinstance(v, float) else f"{v!s:>16}" for v in row.values()))


def main():
    build.load("schemas")
    build.load("cpu")
    print(machine())
    print(f"build: {toolchain.toolchain().describe()}; torch's BLAS: {blas()}")
    print("(ratio = torch time / workbook time: above 1, the workbook is faster)\n")
    print_table(goal_rows())
    print()
    print_table(sum_rows())
    print()
    print_table(matmul_rows())


if __name__ == "__main__":
    main()
