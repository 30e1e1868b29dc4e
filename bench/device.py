"""What lesson 09's device costs per call, measured in the same run.

    python -m bench.device        (or: make bench)

Microseconds per call on two 1,000-element float32 tensors:
- torch.add on CPU tensors: aten's CPU kernel, the reference;
- torch.add on the device: our native kernel (it reads the device's memory as CPU tensors, adds there, and copies
  the result into a new tensor on the device);
- torch.sub on the device, which has no kernel of ours: aten's structured kernel checks the arguments and allocates
  the result on the device, then the boxed fallback serves sub.out: it copies all three tensors (out included) to
  the CPU, runs aten's sub.out there, and copies out back. sub does the same arithmetic as add.
"""

from __future__ import annotations

import torch

from bench.kernels import machine
from bench.timing import seconds
from helpers import device


def per_call_micros(size: int = 1000, min_sample_time: float = 0.05) -> dict[str, float]:
    device.enable()
    a, b = torch.randn(size), torch.randn(size)
    on_device = a.to(device.NAME), b.to(device.NAME)
    calls = {"torch.add, CPU tensors": (torch.add, (a, b)),
             "torch.add on the device (native kernel)": (torch.add, on_device),
             "torch.sub on the device (boxed fallback)": (torch.sub, on_device)}
    return {name: seconds(fn, *args, min_sample_time=min_sample_time) * 1e6 for name, (fn, args) in calls.items()}


def main():
    print(machine())
    micros = per_call_micros()
    print("per call, two 1,000-element float32 tensors:")
    for name, value in micros.items():
        print(f"  {name:42} {value:6.2f} µs")
    native, fallback = micros["torch.add on the device (native kernel)"], micros["torch.sub on the device (boxed fallback)"]
    print(f"  fallback / native kernel: {fallback / native:.1f}x; native kernel / torch on CPU: "
          f"{native / micros['torch.add, CPU tensors']:.1f}x")


if __name__ == "__main__":
    main()
