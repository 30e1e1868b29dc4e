"""Small sample inputs for every workbook operator: what lesson 06's opcheck table and
tests/test_composition.py check each operator with.

    for op_name, args, kwargs in samples.every_op(requires_grad=True): ...
"""

from __future__ import annotations

import torch

def every_op(requires_grad: bool = False, seed: int = 0) -> list[tuple[str, tuple, dict]]:
    """(operator name, args, kwargs) for each operator of torch.ops.workbook, float32 on CPU.

    With requires_grad, the floating-point inputs require grad, except a tensor the operator writes
    into (autograd refuses in-place writes to a leaf that requires grad). Two operators appear only
    without: all_reduce takes integers, which cannot require grad, and add_out refuses inputs that
    require grad, as aten's out= overloads do.
    """
    generator = torch.Generator().manual_seed(seed)

    def tensor(*shape, grad=requires_grad):
        return torch.randn(*shape, generator=generator).requires_grad_(grad)

    cases = [
        ("add", (tensor(4, 3), tensor(4, 3)), {}),
        ("add_", (tensor(4, 3, grad=False), tensor(4, 3)), {}),
        ("add_out", (tensor(4, 3), tensor(4, 3)), {"out": tensor(4, 3, grad=False)}),
        ("sum", (tensor(100),), {}),
        ("matmul", (tensor(4, 5), tensor(5, 3)), {}),
        ("row", (tensor(4, 3), 1), {}),
        ("affine", (tensor(4, 5), tensor(5, 3), tensor(4, 3)), {}),
        ("mean", (tensor(4, 3),), {}),
    ]
    if requires_grad:
        return [case for case in cases if case[0] != "add_out"]
    cases.insert(4, ("all_reduce", (torch.randint(-9, 9, (100,), generator=generator, dtype=torch.int32),), {}))
    return cases
