"""The device on PrivateUse1 (csrc/backend/device.cpp, helpers/device.py): a conformance run of aten operators
against the CPU, native kernels and fallback-served ones, autograd on the device, the allocator's balance, and
mixed-device calls refused."""

import gc

import pytest
import torch

from helpers import device, isolated

NATIVE = {"add", "mul", "mm", "sum", "abs"}  # abs: aten's kernel for abs.out, with the device's loop (abs_stub)


@pytest.fixture(scope="module", autouse=True)
def enabled():
    device.enable()


def tensors(*shapes, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=generator) for shape in shapes]


# (name, function, argument shapes): each runs on CPU tensors and on the same tensors moved to the device.
CASES = [
    ("add", torch.add, [(4, 5), (4, 5)]),
    ("mul", torch.mul, [(4, 5), (4, 5)]),
    ("mm", torch.mm, [(4, 5), (5, 3)]),
    ("sum", torch.sum, [(4, 5)]),
    ("sub", torch.sub, [(4, 5), (4, 5)]),
    ("div", torch.div, [(4, 5), (4, 5)]),
    ("neg", torch.neg, [(4, 5)]),
    ("abs", torch.abs, [(4, 5)]),
    ("exp", torch.exp, [(4, 5)]),
    ("tanh", torch.tanh, [(4, 5)]),
    ("sigmoid", torch.sigmoid, [(4, 5)]),
    ("relu", torch.relu, [(4, 5)]),
    ("softmax", lambda x: torch.softmax(x, dim=1), [(4, 5)]),
    ("mean over a dim", lambda x: x.mean(dim=0), [(4, 5)]),
    ("max", torch.max, [(4, 5)]),
    ("argmax", lambda x: x.argmax(dim=1), [(4, 5)]),
    ("clamp", lambda x: x.clamp(-0.5, 0.5), [(4, 5)]),
    ("pow", lambda x: x.pow(2), [(4, 5)]),
    ("where", lambda x, y: torch.where(x > 0, x, y), [(4, 5), (4, 5)]),
    ("cat", lambda x, y: torch.cat([x, y]), [(4, 5), (2, 5)]),
    ("stack", lambda x, y: torch.stack([x, y]), [(4, 5), (4, 5)]),
    ("transpose, contiguous", lambda x: x.t().contiguous(), [(4, 5)]),
    ("reshape", lambda x: x.reshape(5, 4), [(4, 5)]),
    ("index_select", lambda x: x.index_select(0, torch.tensor([2, 0]).to(x.device)), [(4, 5)]),
    ("matmul, batched", torch.matmul, [(2, 4, 5), (5, 3)]),
    ("zeros_like + fill", lambda x: torch.zeros_like(x).fill_(3.0), [(4, 5)]),
]


@pytest.mark.parametrize("name, function, shapes", CASES, ids=[case[0] for case in CASES])
def test_operator_on_the_device_matches_the_cpu(name, function, shapes):
    inputs = tensors(*shapes)
    expected = function(*inputs)
    got = function(*[x.to(device.NAME) for x in inputs])
    assert got.device.type == device.NAME
    torch.testing.assert_close(got.cpu(), expected)


@pytest.mark.parametrize("name, function, shapes", CASES[:8], ids=[case[0] for case in CASES[:8]])
def test_native_kernels_serve_their_operators_and_the_fallback_the_rest(name, function, shapes):
    inputs = [x.to(device.NAME) for x in tensors(*shapes)]
    before = device.counts()["fallback_calls"]
    function(*inputs)
    served_by_fallback = device.counts()["fallback_calls"] - before
    assert (served_by_fallback == 0) == (name in NATIVE), served_by_fallback


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32, torch.int64])
def test_abs_runs_atens_kernel_with_the_devices_loop_on_any_strides_and_out(dtype):
    x = (tensors((4, 5))[0] * 10).to(dtype)
    on_device = x.to(device.NAME)
    before = device.counts()["fallback_calls"]
    torch.testing.assert_close(on_device.t().abs().cpu(), x.t().abs())  # the iterator handles the strides
    torch.testing.assert_close(on_device[:, ::2].abs().cpu(), x[:, ::2].abs())
    out = torch.empty(0, dtype=dtype, device=device.NAME)
    torch.abs(on_device, out=out)  # aten's kernel resizes `out` (our resize_)
    torch.testing.assert_close(out.cpu(), x.abs())
    assert device.counts()["fallback_calls"] == before
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):  # aten's own check
        torch.abs(on_device, out=torch.empty(0, dtype=dtype))


def test_factories_refuse_pinned_memory_and_sparse_layouts():
    with pytest.raises(RuntimeError, match="only CPU tensors can be pinned; the workbook's device got pin_memory=True"):
        torch.empty(3, device=device.NAME, pin_memory=True)
    with pytest.raises(RuntimeError, match="only CPU tensors can be pinned"):
        torch.empty_strided((3,), (1,), device=device.NAME, pin_memory=True)
    # A sparse layout has a dispatch key of its own, where the device registers nothing.
    with pytest.raises(NotImplementedError, match="'Sparse" + device.NAME + "' backend"):
        torch.empty(3, device=device.NAME, layout=torch.sparse_coo)


def test_accelerator_synchronize_and_the_current_stream_work_new_streams_are_refused():
    torch.accelerator.synchronize()  # the guard's synchronizeDevice: the device's work is synchronous
    stream = torch.accelerator.current_stream()
    assert (stream.stream_id, stream.device) == (0, torch.device(device.NAME, 0))
    with pytest.raises(RuntimeError, match="Backend doesn't support create a new Stream"):
        torch.Stream(device=device.NAME)


def test_native_kernels_keep_the_strides_the_cpus_kernels_choose():
    x, y = tensors((4, 5), (4, 5))
    expected = x.t() + y.t()  # aten keeps its inputs' transposed layout
    got = x.to(device.NAME).t() + y.to(device.NAME).t()
    assert got.stride() == expected.stride() != (4, 1)
    torch.testing.assert_close(got.cpu(), expected)


def test_views_share_the_storage_on_the_device():
    x = tensors((4, 5))[0].to(device.NAME)
    assert x.t().data_ptr() == x.data_ptr() and x.view(20).data_ptr() == x.data_ptr()
    x.view(20)[3] = 7.0
    assert x.cpu()[0, 3].item() == 7.0


@pytest.mark.parametrize("call", [
    lambda v: v.cpu(), lambda v: v.clone().cpu(), lambda v: v.resolve_conj().resolve_neg().cpu(),
    lambda v: torch.empty(v.shape, dtype=v.dtype).to(device.NAME).copy_(v).cpu(), lambda v: (v * v).cpu()],
    ids=["to the CPU", "clone", "resolved", "copy_ into a device tensor", "a product"])
@pytest.mark.parametrize("view", [lambda x: x.conj(), lambda x: (x * 1j).conj().imag], ids=["conjugate", "negative"])
def test_conjugate_and_negative_views_are_copied_as_they_read(view, call):
    # They carry a lazy bit, not new values: a copy resolves it. (Before our copy kernel took the bits, torch's
    # fallback for those keys resolved the view by a clone, a copy that came back to that fallback: a stack overflow.)
    x = torch.tensor([1 + 2j, -3j, 0.5 - 1j])
    torch.testing.assert_close(call(view(x.to(device.NAME))), call(view(x)))


def test_in_place_operators_served_by_the_fallback_write_into_their_argument():
    x, y = tensors((4, 5), (4, 5))
    on_device = x.to(device.NAME)
    storage = on_device.data_ptr()
    on_device.mul_(2).sub_(y.to(device.NAME))
    assert on_device.data_ptr() == storage
    torch.testing.assert_close(on_device.cpu(), x * 2 - y)


def test_out_argument_served_by_the_fallback_is_resized_and_written():
    x, y = tensors((4, 5), (4, 5))
    out = torch.empty(0, device=device.NAME)
    torch.sub(x.to(device.NAME), y.to(device.NAME), out=out)
    assert out.shape == (4, 5)
    torch.testing.assert_close(out.cpu(), x - y)


def test_the_fallback_returns_tuples_and_results_that_are_not_tensors():
    x = tensors((4, 5))[0]
    on_device = x.to(device.NAME)
    values, indices = on_device.max(dim=1)  # a tuple of tensors, both moved back to the device
    assert values.device.type == indices.device.type == device.NAME
    torch.testing.assert_close((values.cpu(), indices.cpu()), tuple(x.max(dim=1)))
    assert torch.equal(on_device, on_device) is True and torch.equal(on_device, on_device + 1) is False  # a bool


def test_random_numbers_on_the_device_come_from_the_cpus_generator():
    torch.manual_seed(0)
    on_device = torch.randn(5, device=device.NAME)
    torch.manual_seed(0)
    assert torch.equal(on_device.cpu(), torch.randn(5))


def test_item_and_printing():
    x = torch.tensor([1.5, -2.0]).to(device.NAME)
    assert x[0].item() == 1.5
    assert repr(x) == "tensor([ 1.5000, -2.0000], device='workbook:0')"


def mlp_gradients_equal_the_cpus():
    x, w1, w2 = tensors((6, 8), (8, 16), (16, 3), seed=1)

    def loss(x, w1, w2):
        return torch.relu(x.mm(w1)).mm(w2).sum()

    cpu_params = [w.clone().requires_grad_() for w in (w1, w2)]
    loss(x, *cpu_params).backward()
    device_params = [w.to(device.NAME).requires_grad_() for w in (w1, w2)]
    loss(x.to(device.NAME), *device_params).backward()
    for ours, reference in zip(device_params, cpu_params):
        assert ours.grad.device.type == device.NAME
        torch.testing.assert_close(ours.grad.cpu(), reference.grad)


def allocations_balance_once_the_tensors_are_gone():
    gc.collect()
    before = device.counts()
    x = tensors((64, 64))[0].to(device.NAME).requires_grad_()
    (x.mm(x) * x).relu().sum().backward()
    del x
    gc.collect()
    after = device.counts()
    assert after["allocations"] > before["allocations"]
    assert after["allocations"] - after["frees"] == before["allocations"] - before["frees"]


@pytest.mark.parametrize("call, message", [
    (lambda x, c: torch.mm(x, c), "mm: `mat2` is on cpu"),
    (lambda x, c: torch.add(c, x), "add: `self` is on cpu"),
    # The fallback's own check, for operators that reach it with a CPU tensor ...
    (lambda x, c: torch.cat([x, c]), "aten::cat: `tensors` is on cpu"),
    (lambda x, c: torch.where(c > 0, x, x), "aten::where: `condition` is on cpu"),
    # ... and torch's, which refuses element-wise operators before any kernel runs.
    (lambda x, c: torch.sub(x, c), "Expected all tensors to be on the same device"),
], ids=["native mm", "native add", "fallback cat", "fallback where", "element-wise sub"])
def test_mixed_device_calls_are_refused_naming_the_argument(call, message):
    x = tensors((4, 4))[0].to(device.NAME)
    with pytest.raises(RuntimeError, match=message):
        call(x, torch.ones(4, 4))


@pytest.mark.parametrize("function", [torch.add, torch.mul, torch.sub],
                         ids=["native add", "native mul", "fallback sub"])
def test_a_zero_dim_cpu_tensor_is_accepted_as_a_scalar(function):
    x = tensors((4, 4))[0]
    torch.testing.assert_close(function(x.to(device.NAME), torch.tensor(3.0)).cpu(), function(x, 3.0))


def workbook_add_has_a_native_kernel_and_a_gradient():
    from helpers import build

    build.load_all("autograd")  # workbook::add's Autograd kernel, registered at the Autograd alias key
    x, y = tensors((4, 5), (4, 5))
    on_device = [t.to(device.NAME).requires_grad_() for t in (x, y)]
    before = device.counts()["fallback_calls"]
    result = torch.ops.workbook.add(*on_device)
    assert device.counts()["fallback_calls"] == before  # our kernel, not the fallback
    torch.testing.assert_close(result.cpu(), x + y)
    (result * result).sum().backward()
    for tensor in on_device:
        assert tensor.grad.device.type == device.NAME
        torch.testing.assert_close(tensor.grad.cpu(), 2 * (x + y))
    with pytest.raises(RuntimeError, match="workbook::add: `other` is on cpu"):
        torch.ops.workbook.add(on_device[0], y)


def opcheck_passes_on_the_device_without_its_autograd_registration_test():
    # opcheck's test_autograd_registration knows only the CPU, CUDA and XPU autograd keys: it raises on an input on
    # the device that requires grad (torch/testing/_internal/optests/autograd_registration.py). The other three run.
    from helpers import build

    build.load_all("meta", "autograd")  # workbook::add's fake kernel (test_faketensor) and its Autograd kernel
    x, y = (t.to(device.NAME).requires_grad_() for t in tensors((4, 5), (4, 5)))
    on_the_device = ("test_schema", "test_faketensor", "test_aot_dispatch_dynamic")
    results = torch.library.opcheck(torch.ops.workbook.add.default, (x, y), test_utils=on_the_device)
    assert results == dict.fromkeys(on_the_device, "SUCCESS"), results
    with pytest.raises(Exception, match="NYI devices other than CPU/CUDA/XPU, got {'workbook'}") as refused:
        torch.library.opcheck(torch.ops.workbook.add.default, (x, y))  # the default test_utils include it
    assert "test_autograd_registration failed" in str(refused.value)


# Backward on the device, each in a new process that registers the device before its first backward. The autograd
# engine sizes its per-device queues once, at a process's first backward, from the devices registered then: after a
# backward on CPU tensors, one on the device fails (test below), and pytest's workers run other files' tests first.
BACKWARD = [mlp_gradients_equal_the_cpus, allocations_balance_once_the_tensors_are_gone,
            workbook_add_has_a_native_kernel_and_a_gradient,
            opcheck_passes_on_the_device_without_its_autograd_registration_test]  # test_aot_dispatch_dynamic: backward


@pytest.mark.parametrize("body", BACKWARD, ids=[body.__name__ for body in BACKWARD])
def test_backward_on_the_device(body):
    # The body passes, then the process ends without shutting the interpreter down, as the fork server's children
    # do: a new Python that ran a backward on the device sometimes aborts in its shutdown ("terminate called without
    # an active exception", about half the runs with WORKBOOK_FORK=0), the autograd engine's device thread meeting a
    # finalizing interpreter (pytorch#190489). An exit crash, not the backward's: lesson 09, section 7, says so.
    done = isolated.run(f"""
        import os, sys
        from helpers import device
        device.enable()
        from tests.test_device import {body.__name__}
        {body.__name__}()
        sys.stdout.flush(), sys.stderr.flush()
        os._exit(0)
    """)
    assert done.returncode == 0, done.stderr[-3000:]


def test_a_backward_before_the_device_is_registered_breaks_backward_on_it():
    done = isolated.run("""
        import torch
        from helpers import device
        torch.ones(2, requires_grad=True).sum().backward()  # the engine starts: no workbook device yet
        device.enable()
        torch.ones(2, device="workbook", requires_grad=True).sum().backward()
    """)
    if torch.cuda.device_count() == 0:
        assert done.returncode == 1 and "device_ready_queues_.size()" in done.stderr, done.stderr[-3000:]
    else:  # the queues are sized for the GPUs, which makes room for device 0 of the workbook's too
        assert done.returncode == 0, done.stderr[-3000:]


def test_the_trace_recorder_sees_native_kernels_and_the_fallback():
    from helpers import trace

    a, b = (x.to(device.NAME) for x in tensors((4, 5), (5, 3)))
    with trace.recording() as events:
        torch.relu(torch.mm(a, b))
    assert [(event.op, event.key, event.depth) for event in events] == [
        ("aten::mm", "PrivateUse1", 0),  # native: the result allocated on the device
        ("aten::empty_strided", "PrivateUse1", 1),
        ("aten::relu", "PrivateUse1", 0),  # the fallback: the argument copied to the CPU, relu there, ...
        ("aten::_copy_from", "PrivateUse1", 1),
        ("aten::empty_strided", "PrivateUse1", 1),  # ... the result copied back to the device
        ("aten::_copy_from", "PrivateUse1", 1),
    ]


def test_a_device_index_the_device_does_not_have_is_refused():
    with pytest.raises(RuntimeError, match="the workbook's device has one index, 0; got workbook:1"):
        torch.ones(3, device=f"{device.NAME}:1")


def test_once_enabled_the_device_is_torchs_accelerator_and_its_random_state_can_be_saved():
    # torch.accelerator now names our device, and code that saves and restores the accelerator's random state asks
    # its module for it: torch.testing's freeze_rng_state, which opcheck's test_aot_dispatch_dynamic runs.
    from torch.testing._utils import freeze_rng_state

    assert torch.accelerator.current_accelerator() == torch.device(device.NAME)
    torch.manual_seed(0)
    with freeze_rng_state():
        first = torch.randn(3, device=device.NAME)
    torch.testing.assert_close(torch.randn(3, device=device.NAME), first)


def test_a_view_operator_left_to_the_fallback_returns_a_copy_and_only_warns():
    # Lesson 09's pitfall: why the device has kernels of its own for as_strided and view.
    base = torch.arange(6.0).to(device.NAME)
    with pytest.warns(UserWarning, match="aten::unfold appears to be a view operator"):
        windows = base.unfold(0, 2, 1)
    windows[0, 0] = 100.0
    assert base.cpu().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0] and windows._base is base


def test_inductor_has_no_code_generation_for_the_device_and_says_so_from_2_14():
    # Lesson 09, section 8: Inductor's lowering asks get_backend_features for the device's scheduling, and an assertion
    # fails there. torch 2.14 gave it a message; 2.13's bare `assert scheduling_ctor` had none.
    import torch._inductor.exc

    torch.compiler.reset()
    x, w = tensors((4, 5), (5, 3))
    with pytest.raises(torch._inductor.exc.InductorError) as caught:
        torch.compile(lambda a, b: torch.relu(a @ b).sum())(x.to(device.NAME), w.to(device.NAME))
    cause = caught.value
    while (cause.__cause__ or cause.__context__) is not None:  # InductorError, from LoweringException, from the assert
        cause = cause.__cause__ or cause.__context__
    assert type(cause) is AssertionError
    assert str(cause) == (f"no scheduling registered for device {device.NAME}" if torch.__version__ >= (2, 14) else "")
    torch.compiler.reset()
