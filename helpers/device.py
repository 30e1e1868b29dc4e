"""Lesson 09's device: the "device" layer (csrc/backend/device.cpp, on the PrivateUse1 dispatch key), given a name.

    from helpers import device
    device.enable()                       # loads the layer; PrivateUse1 is now called "workbook"
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
    """torch.workbook: what torch asks of a device's module (as of torch.cuda) when it creates or seeds tensors there."""
    module = types.ModuleType(f"torch.{NAME}")
    module.is_available = lambda: True
    module.is_initialized = lambda: True
    module.device_count = lambda: 1
    module.current_device = lambda: 0
    module._is_in_bad_fork = lambda: False
    # Random numbers on the device are drawn by the fallback, on the CPU, from the CPU's generator: torch.manual_seed
    # seeds them (tests/test_device.py), and there is no generator of the device's own to seed.
    module.manual_seed_all = lambda seed: None
    return module


def enable() -> None:
    """Load the device layer (after the schemas, which it needs for the trace recorder and workbook::add, and the CPU
    kernels its workbook::add kernel calls) and name PrivateUse1 NAME."""
    build.load_all("schemas", "cpu", "device")
    if torch._C._get_privateuse1_backend_name() == NAME:
        return
    torch.utils.rename_privateuse1_backend(NAME)
    torch.utils.generate_methods_for_privateuse1_backend()  # x.workbook(), x.is_workbook, module.workbook()
    torch._register_device_module(NAME, _device_module())


def counts() -> dict[str, int]:
    """The device's allocations and frees so far, and the operator calls its boxed fallback served."""
    allocations, frees, fallback_calls = torch.ops.workbook_device.counts()
    return {"allocations": allocations, "frees": frees, "fallback_calls": fallback_calls}
