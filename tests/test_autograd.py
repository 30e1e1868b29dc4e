"""csrc/autograd.cpp (and row's composite kernel): gradients of every differentiable input of every operator,
checked by gradcheck and gradgradcheck in float64 with warnings as errors, so no gradient may come from torch's
deprecated autograd fallback; in-place and out= semantics under autograd."""

import contextlib
import warnings

import pytest
import torch
from torch.autograd import gradcheck, gradgradcheck

from helpers import samples, trace


DIFFERENTIABLE = [name for name, op in samples.OPS.items() if op.differentiable]


def leaves(name, dtype=torch.float64):
    """The differentiable tensors of the operator's first sample, as leaves that require grad."""
    values = samples.by_name(name, *samples.inputs(name, dtype)[0])
    return [values[argument].requires_grad_() for argument in samples.OPS[name].differentiable]


def function_of_inputs(call, name, dtype=torch.float64):
    """`call` (the operator, or its reference) as a function of the differentiable inputs of the operator's first
    sample, the other arguments as in the sample. An argument the operator writes is cloned first: a leaf that
    requires grad may not be written in place."""
    args, kwargs = samples.inputs(name, dtype)[0]
    differentiable, written = samples.OPS[name].differentiable, samples.written(name)

    def function(*tensors):
        values = samples.by_name(name, args, kwargs) | dict(zip(differentiable, tensors))
        values = {argument: value.clone() if argument in written else value for argument, value in values.items()}
        return call(*list(values.values())[:len(args)], **{key: values[key] for key in kwargs})  # torch's names differ

    return function


@pytest.fixture(autouse=True)
def warnings_are_errors():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # Except what the garbage of earlier tests in this worker says when it is collected during these (a socket, an
        # event loop left to the collector): pytest reports it as an unraisable warning, and it is not these
        # operators' doing (once it failed gradcheck of add on a warm run).
        warnings.filterwarnings("default", category=pytest.PytestUnraisableExceptionWarning)
        yield


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_gradcheck_and_gradgradcheck_on_every_differentiable_input(workbook, name):
    # affine and row have no autograd code of their own: CompositeImplicitAutograd derives it from what they call.
    function = function_of_inputs(getattr(workbook, name), name)
    assert gradcheck(function, leaves(name))
    assert gradgradcheck(function, leaves(name))


# autograd.cpp's torch::autograd::Function for each operator with an Autograd kernel: the operator's name, capitalized
# (add_'s is AddInPlace: a trailing underscore makes no class name).
FUNCTION = {"add_": "AddInPlace"}


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_one_graph_node_named_after_the_function(workbook, name):
    out = function_of_inputs(getattr(workbook, name), name)(*leaves(name))
    function = FUNCTION.get(name, name.capitalize())
    if torch._C._dispatch_has_kernel_for_dispatch_key(f"workbook::{name}", "CompositeImplicitAutograd"):
        # No node of its own: the nodes of what it calls (affine's last call is add, row's is aten's select).
        assert function not in out.grad_fn.name()
    else:
        assert out.grad_fn.name() == f"torch::autograd::CppNode<workbook::(anonymous namespace)::{function}>"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_gradients_match_torch(workbook, name, dtype):
    # gradcheck needs float64; in float32, compare with the gradients of torch's own operators.
    args = leaves(name, dtype)
    function = function_of_inputs(getattr(workbook, name), name, dtype)
    reference = function_of_inputs(samples.OPS[name].reference, name, dtype)
    grad_output = torch.randn(function(*args).shape, dtype=dtype, generator=torch.Generator().manual_seed(0))
    ours = torch.autograd.grad(function(*args), args, grad_output)
    expected = torch.autograd.grad(reference(*args), args, grad_output)
    torch.testing.assert_close(ours, expected)


def test_sum_with_a_dtype_gives_the_gradient_in_the_inputs_dtype(workbook):
    x = torch.randn(5, requires_grad=True)
    workbook.sum(x, dtype=torch.float64).backward()
    assert x.grad.dtype == torch.float32 and torch.equal(x.grad, torch.ones(5))


def test_in_place_add_gives_both_inputs_their_gradients_and_returns_its_input(workbook):
    x, other = torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)
    y = x.clone()
    assert workbook.add_(y, other) is y
    assert y._version == 1 and "AddInPlace" in y.grad_fn.name()
    (y * y).sum().backward()
    torch.testing.assert_close(x.grad, 2 * (x + other).detach())
    torch.testing.assert_close(other.grad, 2 * (x + other).detach())


def test_in_place_add_on_a_view_reaches_the_base(workbook):
    base = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    other = torch.randn(3, dtype=torch.float64, requires_grad=True)
    copy = base.clone()
    workbook.add_(copy[0], other)
    (copy * 3).sum().backward()
    assert torch.equal(base.grad, torch.full((2, 3), 3.0, dtype=torch.float64))
    assert torch.equal(other.grad, torch.full((3,), 3.0, dtype=torch.float64))


@pytest.mark.parametrize("target", ["leaf", "view of a leaf"])
def test_in_place_add_on_a_leaf_that_requires_grad_is_refused_before_writing(workbook, target):
    # As torch's add_ (check_inplace): refused before the write, so the leaf keeps its values and its version.
    leaf = torch.zeros(2, 3, requires_grad=True)
    x = leaf if target == "leaf" else leaf[0]
    with pytest.raises(RuntimeError, match=f"a {'view of a ' if target != 'leaf' else ''}leaf Variable that requires "
                                           "grad is being used in an in-place operation"):
        workbook.add_(x, torch.ones(3))
    assert leaf._version == 0 and not leaf.detach().any()


def test_in_place_add_with_nothing_to_record_still_bumps_the_version(workbook):
    x = torch.zeros(3)
    workbook.add_(x, torch.ones(3, requires_grad=True).detach())
    assert x._version == 1 and x.grad_fn is None


@pytest.mark.parametrize("which", ["x", "other", "out"])
def test_out_variant_refuses_an_argument_that_requires_grad_as_aten_does(workbook, which):
    args = {"x": torch.ones(3), "other": torch.ones(3), "out": torch.empty(3)}
    args[which].requires_grad_()
    with pytest.raises(RuntimeError, match=r"workbook::add_out\(\): functions with out=\.\.\. arguments don't support "
                                           "automatic differentiation"):
        workbook.add_out(args["x"], args["other"], out=args["out"])
    with torch.no_grad():
        assert workbook.add_out(args["x"], args["other"], out=args["out"]) is args["out"]


def test_row_is_a_view_that_shares_storage_and_carries_gradients(workbook):
    m = torch.randn(4, 3, requires_grad=True)
    r = workbook.row(m, 1)
    assert r._is_view() and r._base is m and r.grad_fn.name() == "SelectBackward0"
    assert r.untyped_storage().data_ptr() == m.untyped_storage().data_ptr()
    r.sum().backward()
    assert torch.equal(m.grad, torch.tensor([[0.0] * 3, [1.0] * 3, [0.0] * 3, [0.0] * 3]))


def test_forward_skips_ad_inplace_or_view_and_backward_calls_our_kernels(workbook):
    a, b = leaves("matmul")
    forward = trace.call(workbook.matmul, a, b)
    assert forward.recorded_path == ["AutogradCPU", "CPU"]
    with trace.recording() as backward:
        forward.result.sum().backward()
    # d a = grad @ b^T and d b = a^T @ grad: two more matmuls, through the dispatcher.
    assert [(e.op, e.key) for e in backward].count(("matmul", "CPU")) == 2


@pytest.mark.parametrize("needed", ["self", "other"])
def test_matmul_backward_computes_only_the_gradients_asked_for(workbook, needed):
    a, b = (t.detach().requires_grad_(name == needed) for t, name in zip(leaves("matmul"), ("self", "other")))
    out = workbook.matmul(a, b)
    with trace.recording() as backward:
        out.sum().backward()
    assert [(e.op, e.key) for e in backward].count(("matmul", "CPU")) == 1
    assert (a.grad is not None, b.grad is not None) == (needed == "self", needed == "other")


def test_no_grad_inputs_give_no_graph(workbook):
    a, b = (t.detach() for t in leaves("matmul"))
    assert workbook.matmul(a, b).grad_fn is None


@pytest.mark.parametrize("how", ["redispatch alone", "register_autograd", "redispatch under the guard"])
def test_an_autograd_kernel_hands_on_under_the_guard_or_a_view_returning_kernel_gives_a_functions_view(how):
    """Lesson 04's guard (and exercise 04.redispatch): an Autograd kernel whose Function hands the call on with
    ADInplaceOrView still on the thread (a redispatch with no guard; torch.library.register_autograd's kernel, which
    hands on under _AutoDispatchBelowAutograd() alone) lets the aten calls of the backend kernel below go through
    ADInplaceOrView again: a kernel that ends in a view hands back a view made inside the Function, which the caller
    may not write into in place while autograd records. Under torch._C._AutoDispatchBelowADInplaceOrView(), as
    torch's generated kernels of functional operators hand on, it may."""
    with torch.library._scoped_library("test_guard", "FRAGMENT") as lib:
        lib.define("scale2(Tensor x) -> Tensor")
        op = torch.ops.test_guard.scale2.default
        lib.impl("scale2", lambda x: (x * 2).reshape(-1).view(x.shape), "CPU")  # ends in a view

        class Scale2(torch.autograd.Function):
            @staticmethod
            def forward(ctx, keyset, x):
                guarded = how == "redispatch under the guard"
                with torch._C._AutoDispatchBelowADInplaceOrView() if guarded else contextlib.nullcontext():
                    return op.redispatch(keyset & torch._C._after_autograd_keyset, x)

            @staticmethod
            def backward(ctx, grad):
                return None, 2 * grad

        if how == "register_autograd":
            torch.library.register_autograd("test_guard::scale2", lambda ctx, grad: 2 * grad, lib=lib)
        else:
            lib.impl("scale2", lambda keyset, x: Scale2.apply(keyset, x), "Autograd", with_keyset=True)
        x = torch.randn(3, 4, requires_grad=True)
        y = op(x)
        assert y._is_view() is (how != "redispatch under the guard")
        if y._is_view():
            # "Output 0 of Scale2 ..." ("Scale2Backward" before torch renamed the node in this message)
            with pytest.raises(RuntimeError, match=r"Output 0 of \w+ is a view and is being modified inplace"):
                y.add_(1)
            return
        y.add_(1)
        y.sum().backward()
        assert torch.equal(x.grad, torch.full((3, 4), 2.0))
