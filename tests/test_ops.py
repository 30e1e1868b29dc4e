"""The workbook's operators on CPU and Meta: results against torch, opcheck, and every bad input.

In the style of pytorch/extension-cpp: every operator's sample inputs, reference and bad inputs come from one table,
helpers/samples.py (tests/test_samples.py checks that it holds every operator). The CUDA kernels have their own file
(test_cuda.py)."""

import pytest
import torch
from torch.library import opcheck

from helpers import samples

OPS = samples.OPS
# float32 and float64 to near their precision (float64's atol is assert_close's default); bfloat16 and float16 to
# assert_close's defaults for them (about two units in the last place: the sums round once, but in another order than
# torch's). The operators whose every element is rounded once (samples.Op.exact), and integers, exactly.
TOLERANCE = {torch.float32: {"rtol": 1e-5, "atol": 1e-4}, torch.float64: {"rtol": 1e-12, "atol": 1e-7},
             torch.bfloat16: {}, torch.float16: {}}
ON_CPU = [name for name, op in OPS.items() if "cpu" in op.devices]
EVERY_DTYPE = [pytest.param(name, dtype, id=f"{name}-{str(dtype).removeprefix('torch.')}")
               for name in ON_CPU for dtype in OPS[name].dtypes]


@pytest.mark.parametrize("name, dtype", EVERY_DTYPE)
def test_matches_torch(workbook, name, dtype):
    # The result, and every argument the operator writes, against the reference on copies of the same arguments; a
    # result the schema says aliases an argument (a view, or the argument written) shares its memory.
    for args, kwargs in samples.inputs(name, dtype):
        expected_args, expected_kwargs = samples.on("cpu", args, kwargs)
        result = getattr(workbook, name)(*args, **kwargs)
        expected = OPS[name].reference(*expected_args, **expected_kwargs)
        for ours, reference in zip(samples.outputs(result, args, kwargs),
                                   samples.outputs(expected, expected_args, expected_kwargs)):
            assert ours.dtype == reference.dtype and ours.shape == reference.shape
            if dtype.is_floating_point and not OPS[name].exact:
                torch.testing.assert_close(ours, reference, equal_nan=True, **TOLERANCE[dtype])  # mean of nothing: nan
            else:
                assert torch.equal(ours, reference), (name, dtype, [tuple(t.shape) for t in args])
        if aliased := samples.aliased(name):
            aliased_argument = samples.by_name(name, args, kwargs)[aliased]
            assert result.untyped_storage().data_ptr() == aliased_argument.untyped_storage().data_ptr()


@pytest.mark.parametrize("name", [name for name, op in OPS.items() if "meta" in op.devices])
def test_meta_kernels_give_shapes_and_dtypes(workbook, name):
    for dtype in OPS[name].dtypes:
        on_meta = samples.inputs(name, dtype, device="meta")
        for (args, kwargs), (meta_args, meta_kwargs) in zip(samples.inputs(name, dtype), on_meta):
            meta = samples.outputs(getattr(workbook, name)(*meta_args, **meta_kwargs), meta_args, meta_kwargs)
            expected = samples.outputs(OPS[name].reference(*args, **kwargs), args, kwargs)
            for result, reference in zip(meta, expected):
                assert result.device.type == "meta"
                assert (result.shape, result.dtype) == (reference.shape, reference.dtype), (name, dtype)


def test_float32_sum_of_16m_elements_is_accurate(workbook):
    x = samples.tensor((1 << 24,), torch.float32)
    exact = x.double().sum()
    assert abs(workbook.sum(x).double() - exact) <= abs(torch.sum(x).double() - exact) + 1e-3


def test_int32_sum_accumulates_in_int64_like_torch(workbook):
    x = torch.full((1 << 20,), 2**30, dtype=torch.int32)  # the total overflows int32
    assert workbook.sum(x).item() == torch.sum(x).item() == 2**50
    assert workbook.sum(x, dtype=torch.int32).item() == torch.sum(x, dtype=torch.int32).item()


def test_row_is_a_view_sharing_storage(workbook):
    m = samples.tensor((4, 3), torch.float32)
    r = workbook.row(m, -1)
    assert torch.equal(r, m[-1])
    assert r.untyped_storage().data_ptr() == m.untyped_storage().data_ptr()
    r.add_(1)  # writes through to m
    assert torch.equal(m[-1], r)


@pytest.mark.parametrize("name, dtype", EVERY_DTYPE)
def test_opcheck_per_dtype(workbook, name, dtype):
    # Every operator, with and without requires_grad, is opchecked in lesson 06 (its table); here, every dtype.
    for args, kwargs in samples.inputs(name, dtype)[:3]:
        opcheck(getattr(workbook, name).default, args, kwargs)


BAD_INPUTS = [(name, what, device) for name, op in OPS.items() for device in ("cpu", "meta") if device in op.devices
              for what in op.bad_inputs]


@pytest.mark.parametrize("name, what, device", BAD_INPUTS)
def test_bad_input_is_refused_with_a_message_naming_the_argument(workbook, name, what, device):
    # The Meta kernels run the CPU kernels' checks (csrc/checks.h): the same message on either device.
    args, kwargs, message = samples.bad_inputs(name, device)[what]
    with pytest.raises(RuntimeError, match=message):
        getattr(workbook, name)(*args, **kwargs)


def own_kernel(name, key):
    return torch._C._dispatch_has_kernel_for_dispatch_key(f"workbook::{name}", key)


@pytest.mark.parametrize("name", ON_CPU)
def test_a_tensor_on_another_device_is_refused(workbook, name):
    # One tensor argument on meta, the others on the CPU: the dispatcher picks the Meta kernel (Meta outranks CPU),
    # which refuses the first argument still on the CPU.
    values = samples.by_name(name, *samples.inputs(name, OPS[name].dtypes[0])[0])
    names = [argument for argument, value in values.items() if isinstance(value, torch.Tensor)]
    if len(names) < 2 or not own_kernel(name, "Meta"):
        pytest.skip(f"{name}: one tensor argument" if len(names) < 2 else f"{name}: a composite, its parts check")
    for moved in names:
        refused = next(argument for argument in names if argument != moved)
        with pytest.raises(RuntimeError, match=rf"workbook::{name}: `{refused}` must be on meta, got cpu"):
            getattr(workbook, name)(**values | {moved: values[moved].to("meta")})


@pytest.mark.parametrize("name", ON_CPU)
def test_cpu_kernels_refuse_non_strided_layouts(workbook, name):
    # Through the dispatcher a sparse tensor never reaches the CPU kernel (it dispatches to
    # SparseCPU, where nothing is registered). Call the CPU kernel directly to test its own check.
    if not own_kernel(name, "CPU"):
        pytest.skip(f"{name}: a composite, no CPU kernel of its own")
    args, kwargs = samples.inputs(name, OPS[name].dtypes[0])[0]
    sparse_args, sparse_kwargs = samples.each_tensor(torch.Tensor.to_sparse, args, kwargs)
    with pytest.raises(NotImplementedError, match="SparseCPU"):
        getattr(workbook, name)(*sparse_args, **sparse_kwargs)
    cpu_only = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)
    first = next(argument for argument, value in samples.by_name(name, args, kwargs).items()
                 if isinstance(value, torch.Tensor))
    with pytest.raises(RuntimeError, match=rf"`{first}` must be a dense \(strided\) tensor, got layout Sparse"):
        getattr(workbook, name).default.redispatch(cpu_only, *sparse_args, **sparse_kwargs)


def test_empty_inputs(workbook):
    empty = torch.ones(0)
    assert workbook.add(empty, empty).shape == (0,)
    assert workbook.sum(empty).item() == 0 and workbook.sum(torch.ones(0, dtype=torch.int32)).item() == 0
    assert torch.equal(workbook.matmul(torch.ones(5, 0), torch.ones(0, 3)), torch.zeros(5, 3))
    assert workbook.matmul(torch.ones(0, 4), torch.ones(4, 3)).shape == (0, 3)


def test_row_refuses_non_strided_layouts(workbook):
    # row is registered at CompositeImplicitAutograd, which covers the sparse backends too, so a
    # sparse tensor reaches its kernel through the dispatcher and its own check answers.
    with pytest.raises(RuntimeError, match=r"workbook::row: `self` must be a dense \(strided\) tensor, got layout "
                                           "Sparse"):
        workbook.row(torch.eye(3).to_sparse(), 0)
