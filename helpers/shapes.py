"""Fake tensors with symbolic sizes, as torch.compile(dynamic=True) and torch.export with a Dim trace with, and the
guards that kernels add to them, written with the tensors' names:

    mode, fakes = shapes.symbolic(a=torch.randn(5, 3), b=torch.randn(3, 4))
    with mode:
        out = torch.ops.workbook.matmul(fakes["a"], fakes["b"])
    shapes.named(out.shape, mode)   # ['a.size(0)', 'b.size(1)']
    shapes.guards(mode)             # ['a.size(1) == b.size(0)']

A guard is a condition on the sizes that a kernel's code relied on (comparing two symbols, or reading one as a
number): Dynamo checks each before reusing a graph, and export refuses a Dim that one of them pins to a value.
Symbols are named after the tensor and dimension they stand for; torch's own names (s97, ...) are hashes of those,
which this helper does not print, so that the same call prints the same text on every torch release.
"""

from __future__ import annotations

import re

import torch
from torch._dynamo.source import LocalSource
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext
from torch.utils._sympy.printers import PythonPrinter


def symbolic(**tensors: torch.Tensor) -> tuple[FakeTensorMode, dict[str, torch.Tensor]]:
    """A FakeTensorMode with a ShapeEnv, and a fake copy of each tensor whose every size is a symbol of its own (sizes 0
    and 1 stay numbers: the ShapeEnv specializes them)."""
    mode = FakeTensorMode(shape_env=ShapeEnv())
    fakes = {name: mode.from_tensor(tensor, source=LocalSource(name), symbolic_context=StatelessSymbolicContext(
                 dynamic_sizes=[DimDynamic.DYNAMIC] * tensor.dim()))
             for name, tensor in tensors.items()}
    return mode, fakes


def _readable(expression, mode: FakeTensorMode) -> str:
    """An expression over the symbols, written with the sizes they stand for: `a.size(1) == b.size(0)`."""
    names = {}
    for symbol, sources in mode.shape_env.var_to_sources.items():
        # Dynamo's name for the first place the symbol was read, L['a'].size()[1], as Python would write it. It is a
        # method up to torch 2.14, a property from 2.15.
        source = sources[0].name() if callable(sources[0].name) else sources[0].name
        names[str(symbol)] = re.sub(r"L\['(\w+)'\]\.size\(\)\[(\d+)\]", r"\1.size(\2)", source)
    text = PythonPrinter().doprint(expression)
    return re.sub(r"\b[su]\d+\b", lambda match: names.get(match.group(0), match.group(0)), text)


def named(size, mode: FakeTensorMode) -> list[str]:
    """Each size of a fake tensor's shape: a number, or the symbol's expression in the inputs' names."""
    return [_readable(s.node.expr, mode) if isinstance(s, torch.SymInt) else str(s) for s in size]


def guards(mode: FakeTensorMode) -> list[str]:
    """The guards added to the mode's ShapeEnv so far, in the order they were added."""
    return [_readable(guard.expr, mode) for guard in mode.shape_env.guards]


def unbacked(count: int = 1) -> tuple[FakeTensorMode, list[torch.SymInt]]:
    """A FakeTensorMode with a ShapeEnv, and `count` sizes no trace knows (unbacked symbols, each a size: the count of
    x[x > 0], as torch.export meets after .item() or nonzero())."""
    mode = FakeTensorMode(shape_env=ShapeEnv())
    sizes = [mode.shape_env.create_unbacked_symint() for _ in range(count)]
    for size in sizes:
        torch._check_is_size(size)
    return mode, sizes
