"""Lesson 09's device: the layers "device" and "device_guard" (csrc/backend/, on the PrivateUse1 dispatch key), given
a name.

    from helpers import device
    device.enable()                       # loads the layers; PrivateUse1 is now called "workbook"
    x = torch.ones(3, device="workbook")  # or torch.ones(3).workbook(); x.is_workbook is True

torch.utils.rename_privateuse1_backend can run once per process, and cannot be undone: enable() may be called
any number of times.
"""

from __future__ import annotations

import types

import torch

from . import build

NAME = "workbook"


def _device_module() -> types.ModuleType:
    """torch.workbook: what torch asks of a device's module (as of torch.cuda) to create or seed tensors there."""
    module = types.ModuleType(f"torch.{NAME}")
    module.is_available = lambda: True
    module.is_initialized = lambda: True
    module.device_count = lambda: 1
    module.current_device = lambda: 0
    module._is_in_bad_fork = lambda: False
    # Random numbers on the device are drawn by the fallback, on the CPU, from the CPU's generator: torch.manual_seed
    # seeds them (tests/test_device.py), and there is no generator of the device's own: its state is the CPU's.
    # (torch asks for these once the device is torch.accelerator's: opcheck saves and restores the state.)
    module.manual_seed_all = lambda seed: None
    module.get_rng_state = lambda device=NAME: torch.get_rng_state()
    module.set_rng_state = lambda new_state, device=NAME: torch.set_rng_state(new_state)
    # torch.autocast(NAME) asks which lower-precision dtypes the device has. Entering it changes nothing by itself:
    # torch registers no autocast kernels at AutocastPrivateUse1, a backend registers its own (lesson 09).
    module.get_amp_supported_dtype = lambda: [torch.float16, torch.bfloat16]
    return module


def enable() -> None:
    """Load the device's layers (after the schemas, which they need for the trace recorder and workbook::add, and the
    CPU kernels their workbook::add kernel calls) and name PrivateUse1 NAME."""
    build.load_all("schemas", "cpu", "device", "device_guard")
    name_backend()


def name_backend() -> None:
    """Name PrivateUse1 NAME, give tensors and modules its methods, and register its module as torch.<NAME>."""
    if torch._C._get_privateuse1_backend_name() == NAME:
        return
    torch.utils.rename_privateuse1_backend(NAME)
    torch.utils.generate_methods_for_privateuse1_backend()  # x.workbook(), x.is_workbook, module.workbook()
    torch._register_device_module(NAME, _device_module())


def served(events) -> list[tuple[str, str]]:
    """For each call that reached the device (the recorder's events at PrivateUse1 that no other PrivateUse1 kernel
    made): the operator, and "native" where a kernel of ours is registered for it, "fallback" where the boxed
    fallback served it."""
    def qualified(op: str) -> str:  # the workbook's kernels record their operator's name without the namespace
        return op if "::" in op else f"workbook::{op}"

    calls, open_depth = [], None  # open_depth: the depth of the device call the events are inside, if any
    for event in events:
        if open_depth is not None and event.depth <= open_depth:
            open_depth = None
        if open_depth is None and event.key == "PrivateUse1":
            native = torch._C._dispatch_has_kernel_for_dispatch_key(qualified(event.op), "PrivateUse1")
            calls.append((event.op, "native" if native else "fallback"))
            open_depth = event.depth
    return calls


def counts() -> dict[str, int]:
    """The device's allocations and frees so far, and the operator calls its boxed fallback served."""
    allocations, frees, fallback_calls = torch.ops.workbook_device.counts()
    return {"allocations": allocations, "frees": frees, "fallback_calls": fallback_calls}
