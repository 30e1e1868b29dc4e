"""csrc/autograd.cpp: the C++ autograd Functions, checked by gradcheck and gradgradcheck
(opcheck, with and without requires_grad: test_composition.py)."""

import pytest
import torch
from torch.autograd import gradcheck, gradgradcheck

from helpers import trace


def inputs(name, seed=0):
    generator = torch.Generator().manual_seed(seed)

    def make(*shape):
        return torch.randn(*shape, generator=generator, dtype=torch.float64, requires_grad=True)

    return {"add": (make(3, 4), make(3, 4)), "matmul": (make(3, 5), make(5, 2)),
            "affine": (make(3, 5), make(5, 2), make(3, 2))}[name]


@pytest.mark.parametrize("name", ["add", "matmul", "affine"])
def test_gradcheck_and_gradgradcheck(workbook, name):
    # affine has no autograd code of its own: CompositeImplicitAutograd derives it from add and matmul.
    op = getattr(workbook, name)
    assert gradcheck(op, inputs(name))
    assert gradgradcheck(op, inputs(name))


@pytest.mark.parametrize("name", ["add", "matmul"])
def test_one_graph_node_named_after_the_function(workbook, name):
    out = getattr(workbook, name)(*inputs(name))
    assert out.grad_fn.name() == f"torch::autograd::CppNode<workbook::(anonymous namespace)::{name.capitalize()}>"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name, reference", [("add", torch.add), ("matmul", torch.matmul),
                                             ("affine", lambda x, w, b: x @ w + b)])
def test_gradients_match_torch(workbook, name, reference, dtype):
    # gradcheck needs float64; in float32, compare with the gradients of torch's own operators.
    args = [t.detach().to(dtype).requires_grad_() for t in inputs(name)]
    grad_output = torch.randn(getattr(workbook, name)(*args).shape, dtype=dtype)
    ours = torch.autograd.grad(getattr(workbook, name)(*args), args, grad_output)
    expected = torch.autograd.grad(reference(*args), args, grad_output)
    torch.testing.assert_close(ours, expected)


def test_forward_skips_ad_inplace_or_view_and_backward_calls_our_kernels(workbook):
    a, b = inputs("matmul")
    forward = trace.call(workbook.matmul, a, b)
    assert forward.recorded_path == ["AutogradCPU", "CPU"]
    with trace.recording() as backward:
        forward.result.sum().backward()
    # d a = grad @ b^T and d b = a^T @ grad: two more matmuls, through the dispatcher.
    assert [(e.op, e.key) for e in backward].count(("matmul", "CPU")) == 2


def test_no_grad_inputs_give_no_graph(workbook):
    a, b = (t.detach() for t in inputs("matmul"))
    assert workbook.matmul(a, b).grad_fn is None
