"""Small sample inputs for every workbook operator (what lesson 06's opcheck table, the installed wheel's check and
the tests run each operator on), and the small model lessons 06 and 08 compile and export.

    for op_name, args, kwargs in samples.every_op(requires_grad=True): ...
    model = samples.TinyMLP()
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


class TinyMLP(torch.nn.Module):
    """The small model of lessons 06 and 08: affine (a CompositeImplicitAutograd of matmul and add), torch's relu,
    then matmul. Any batch size: the bias is expanded to the batch, as workbook::add does not broadcast."""

    def __init__(self, n_in: int = 32, n_hidden: int = 64, n_out: int = 8, seed: int = 0):
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        self.w1 = torch.nn.Parameter(torch.randn(n_in, n_hidden, generator=generator) / n_in**0.5)
        self.b1 = torch.nn.Parameter(torch.randn(n_hidden, generator=generator) / 10)
        self.w2 = torch.nn.Parameter(torch.randn(n_hidden, n_out, generator=generator) / n_hidden**0.5)

    def forward(self, x):
        bias = self.b1.expand(x.shape[0], -1)
        hidden = torch.relu(torch.ops.workbook.affine(x, self.w1, bias))
        return torch.ops.workbook.matmul(hidden, self.w2)
