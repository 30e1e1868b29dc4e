"""One row per operator of the workbook (csrc/schemas.cpp): its dtypes, sample calls, the torch expression it must
match, its differentiable arguments and the bad inputs it must refuse. tests/test_ops.py, test_autograd.py and
test_cuda.py, lesson 06's opcheck table and the installed wheel's check (helpers/shipping.py) all read this table, and
tests/test_samples.py fails while it lacks an operator the library defines. Also the small model lessons 06 and 08
compile and export.

    samples.OPS["matmul"].dtypes, samples.inputs("matmul", torch.float64, device="meta")
    for op_name, args, kwargs in samples.every_op(requires_grad=True): ...
    model = samples.TinyMLP()
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

import torch

from . import paths

# The schemas as csrc/schemas.cpp declares them, read with torch's own schema parser, for the arguments' names and
# which ones an operator writes: no library needed (the wheel's samples are saved where none may be loaded).
SCHEMAS = {schema.name: schema for schema in map(
    torch._C.parse_schema, re.findall(r'm\.def\("([^"]+)"', (paths.CSRC / "schemas.cpp").read_text()))}


def call(*args, **kwargs) -> tuple[tuple, dict]:
    """One call's arguments, as opcheck takes them: (args, kwargs)."""
    return args, kwargs


@dataclass(frozen=True)
class Op:
    """One operator's row: what it takes, what it must give, what it must refuse."""

    dtypes: tuple[torch.dtype, ...]  # every dtype its kernels take
    # (make) -> its sample calls; make(*shape) is a seeded tensor of one dtype on one device. The first call is the
    # typical one (lesson 06's table, the wheel's check, gradcheck); opcheck runs the first three, so keep them small.
    samples: Callable
    reference: Callable  # the same call in torch: what the result, and every argument written, must equal
    differentiable: tuple[str, ...] = ()  # the arguments gradients flow to, by their names in the schema
    bad_inputs: dict[str, tuple[tuple[tuple, dict], str]] = field(default_factory=dict)  # what: (call, message regex)
    devices: tuple[str, ...] = ("cpu", "meta", "cuda")  # where it runs: a kernel of its own or a composite
    exact: bool = False  # each element is the exact result rounded once (elementwise, views): compared for equality


ALL = (torch.float32, torch.float64, torch.int32, torch.int64, torch.bfloat16, torch.float16)
FLOATING = (torch.float32, torch.float64, torch.bfloat16, torch.float16)  # bfloat16, float16: what autocast casts to
# Elementwise shapes: one element, odd sizes, many blocks of threads ((1 << 20) + 3 on a GPU), none.
SHAPES = [(7, 5), (1,), (1000, 3), (1000,), (33, 17), ((1 << 20) + 3,), (0,)]


def ones(*shape, dtype=torch.float32):
    return torch.ones(shape, dtype=dtype)


# The bad inputs' tensors (on the CPU: bad_inputs() moves them): a float32 2 x 3 matrix, the same in int16, and a
# 2 x 3 view that is not contiguous, which a kernel cannot write straight into.
mat, shorts, across = ones(2, 3), ones(2, 3, dtype=torch.int16), ones(3, 2).T

OPS = {
    "add": Op(
        dtypes=ALL,
        samples=lambda make: [call(make(*s), make(*s)) for s in SHAPES] + [
            call(make(5, 7).T, make(7, 5)), call(make(64, 48).T, make(48, 64))],
        reference=torch.add,
        differentiable=("self", "other"),
        bad_inputs={
            "unsupported dtype": (call(shorts, shorts),
                                  r"`self` has dtype Short; supported: Float, Double, Int, Long, BFloat16, Half"),
            "bool": (call(mat.bool(), mat.bool()), r"workbook::add: `self` has dtype Bool"),
            "dtypes differ": (call(mat, mat.int()), r"`other` has dtype Int but `self` has dtype Float"),
            "float and double": (call(mat, mat.double()), r"`other` has dtype Double but `self` has dtype Float"),
            "shapes differ": (call(mat, ones(3, 2)), r"`other` has shape \[3, 2\] but `self` has shape \[2, 3\]"),
        },
        exact=True),
    "add_": Op(
        dtypes=ALL,
        samples=lambda make: [call(make(*s), make(*s)) for s in SHAPES] + [call(make(7, 5), make(5, 7).T)],
        reference=lambda x, other: x.add_(other),
        differentiable=("x", "other"),
        bad_inputs={
            "x not contiguous": (call(across, mat), r"workbook::add_: `x` is written in place and must be contiguous"),
            "dtypes differ": (call(mat, mat.double()),
                              r"workbook::add_: `other` has dtype Double but `x` has dtype Float"),
        },
        exact=True),
    # Like aten's out= overloads it refuses inputs that require grad (tests/test_autograd.py): nothing differentiable.
    "add_out": Op(
        dtypes=ALL,
        samples=lambda make: [call(make(*s), make(*s), out=make(*s)) for s in SHAPES] + [
            call(make(5, 7).T, make(7, 5), out=make(7, 5))],
        reference=lambda x, other, out: torch.add(x, other, out=out),
        bad_inputs={
            "out dtype": (call(mat, mat, out=mat.int()), r"`out` has dtype Int but `x` has dtype Float"),
            "out shape": (call(mat, mat, out=ones(6)), r"`out` has shape \[6\] but `x` has shape \[2, 3\]"),
            "out not contiguous": (call(mat, mat, out=across), r"`out` is written in place"),
        },
        exact=True),
    "sum": Op(
        dtypes=(torch.float32, torch.float64, torch.int32, torch.int64),
        samples=lambda make: [call(make(*s)) for s in [(1000,), (1,), (33, 65), (1 << 16 | 3,), ((1 << 20) + 3,), (0,)]]
        + [call(make(40, 30).T), call(make(100), dtype=torch.float64)],
        reference=lambda self, dtype=None: torch.sum(self, dtype=dtype),
        differentiable=("self",),
        bad_inputs={
            "unsupported dtype": (call(shorts), r"workbook::sum: `self` has dtype Short"),
            "unsupported result dtype": (call(mat, dtype=torch.float16),
                                         r"`dtype` must be one of Float, Double, Int, Long, got Half"),
        }),
    "all_reduce": Op(
        dtypes=(torch.int32, torch.int64),
        samples=lambda make: [call(make(*s)) for s in [(1000,), (1,), (1 << 16 | 3,), (5, 0)]],
        reference=lambda self: torch.sum(self, dtype=torch.int64),
        bad_inputs={
            "floating dtype": (call(mat), r"workbook::all_reduce: `self` has dtype Float; supported: Int, Long"),
        }),
    "matmul": Op(
        dtypes=FLOATING,
        samples=lambda make: [call(make(n, k), make(k, m)) for n, k, m in [
            (3, 5, 7), (1, 1, 1), (33, 17, 65), (64, 256, 64), (70, 300, 130), (256, 256, 256), (5, 0, 3), (0, 4, 3)]]
        + [call(make(9, 4).T, make(9, 6)), call(make(40, 33).T, make(40, 7))],
        reference=torch.matmul,
        differentiable=("self", "other"),
        bad_inputs={
            "integer dtype": (call(mat.int(), mat.int().T),
                              r"workbook::matmul: `self` has dtype Int; supported: Float, Double, BFloat16, Half"),
            "dtypes differ": (call(mat, mat.T.double()), r"`other` has dtype Double but `self` has dtype Float"),
            "self not 2-D": (call(ones(2, 3, 4), mat), r"`self` must be 2-D, got 3-D with shape \[2, 3, 4\]"),
            "other not 2-D": (call(mat, ones(3)), r"`other` must be 2-D, got 1-D"),
            "inner sizes differ": (call(mat, mat), r"`self` is \[2, 3\] and `other` is \[2, 3\]; "
                                                   r"self.size\(1\) must equal other.size\(0\)"),
        }),
    "row": Op(
        dtypes=ALL,
        samples=lambda make: [call(make(4, 3), -2), call(make(4, 3), 1)] + [call(make(5, 7), i) for i in (0, 2, -1)]
        + [call(make(7, 5).T, 3)],
        reference=lambda self, index: self[index],
        differentiable=("self",),
        bad_inputs={
            "not 2-D": (call(ones(3), 0), r"workbook::row: `self` must be 2-D"),
            "index out of range": (call(mat, 2), r"workbook::row: `index` 2 is out of range for 2 rows"),
        },
        exact=True),
    # A composite of matmul and add: their checks refuse its bad inputs, in their own names.
    "affine": Op(
        dtypes=FLOATING,
        samples=lambda make: [call(make(n, k), make(k, m), make(n, m))
                              for n, k, m in [(4, 5, 3), (1, 1, 1), (33, 17, 65)]] + [
            call(make(9, 4).T, make(9, 6), make(4, 6))],
        reference=lambda self, weight, bias: self @ weight + bias,
        differentiable=("self", "weight", "bias"),
        bad_inputs={
            "weight's rows": (call(mat, mat, mat), r"workbook::matmul: `self` is \[2, 3\] and `other` is \[2, 3\]"),
            "bias not the output's shape": (call(mat, mat.T, ones(2)),
                                            r"workbook::add: `other` has shape \[2\] but `self` has shape \[2, 2\]"),
        }),
    "mean": Op(
        dtypes=(torch.float32, torch.float64),
        samples=lambda make: [call(make(*s)) for s in [(4, 3), (1,), (1000,), (0,)]] + [call(make(40, 30).T)],
        reference=torch.mean,
        differentiable=("self",),
        bad_inputs={
            "integer dtype": (call(mat.int()), r"workbook::mean: `self` has dtype Int; supported: Float, Double"),
        }),
}


def tensor(shape, dtype: torch.dtype, device: str = "cpu", seed: int | torch.Generator = 0) -> torch.Tensor:
    """Random numbers of `dtype` on `device`: standard normal, or integers in [-1000, 1000). `seed` may be a generator
    to draw from."""
    generator = seed if isinstance(seed, torch.Generator) else torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=generator, dtype=dtype).to(device)
    return torch.randint(-1000, 1000, shape, generator=generator, dtype=dtype).to(device)


def inputs(name: str, dtype: torch.dtype, device: str = "cpu", seed: int = 0) -> list[tuple[tuple, dict]]:
    """OPS[name]'s sample calls, their tensors of `dtype` on `device`, the same numbers on every run."""
    generator = torch.Generator().manual_seed(seed)
    return OPS[name].samples(lambda *shape: tensor(shape, dtype, device, generator))


def bad_inputs(name: str, device: str = "cpu") -> dict[str, tuple[tuple, dict, str]]:
    """OPS[name]'s bad inputs on `device` (their strides kept): {what: (args, kwargs, message)}."""
    return {what: (*on(device, *arguments), message) for what, (arguments, message) in OPS[name].bad_inputs.items()}


def each_tensor(function: Callable, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """The call with `function` applied to each of its tensors, the other arguments as they are."""
    def apply(value):
        return function(value) if isinstance(value, torch.Tensor) else value

    return tuple(map(apply, args)), {key: apply(value) for key, value in kwargs.items()}


def on(device: str, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """The call with its tensors copied to `device`, strides kept."""
    return each_tensor(lambda value: value.to(device, copy=True), args, kwargs)


def outputs(result: torch.Tensor, args: tuple, kwargs: dict) -> list[torch.Tensor]:
    """What a call gives: its result and every tensor argument (so the ones it wrote)."""
    return [result, *(value for value in [*args, *kwargs.values()] if isinstance(value, torch.Tensor))]


def arguments(name: str) -> list[str]:
    """The names of the operator's arguments, in order."""
    return [argument.name for argument in SCHEMAS[name].arguments]


def by_name(name: str, args: tuple, kwargs: dict) -> dict:
    """The call's arguments by their names in the schema; the operator takes them so too: op(**by_name(...))."""
    return dict(zip(arguments(name), args)) | kwargs


def written(name: str) -> set[str]:
    """The arguments the operator writes in place (`Tensor(a!)` in its schema)."""
    return {argument.name for argument in SCHEMAS[name].arguments
            if argument.alias_info is not None and argument.alias_info.is_write}


def aliased(name: str) -> str | None:
    """The argument the operator's result aliases, a view of it or itself (`Tensor(a)` on both in its schema)."""
    returned = SCHEMAS[name].returns[0].alias_info
    return None if returned is None else next(
        argument.name for argument in SCHEMAS[name].arguments
        if argument.alias_info is not None and argument.alias_info.before_set == returned.before_set)


def every_op(requires_grad: bool = False, seed: int = 0) -> list[tuple[str, tuple, dict]]:
    """(operator name, args, kwargs): each operator's first sample call, float32 (else its first dtype) on the CPU.

    With requires_grad, only the operators with a differentiable argument, whose differentiable tensors then require
    grad, except one the operator writes into (autograd refuses in-place writes to a leaf that requires grad). So
    all_reduce (integers) and add_out (refuses inputs that require grad, as aten's out= overloads do) appear only
    without.
    """
    cases = []
    for name, op in OPS.items():
        if requires_grad and not op.differentiable:
            continue
        args, kwargs = inputs(name, torch.float32 if torch.float32 in op.dtypes else op.dtypes[0], seed=seed)[0]
        if requires_grad:
            grads = set(op.differentiable) - written(name)
            args = tuple(arg.requires_grad_() if argument in grads else arg
                         for argument, arg in zip(arguments(name), args))
        cases.append((name, args, kwargs))
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
