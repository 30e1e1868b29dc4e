"""Fallthrough, in-place and view operators (csrc/fallthrough.cpp, csrc/ad_inplace_or_view.cpp)."""

import pytest
import torch

from helpers import trace


def test_fallthrough_skips_autograd_and_backward_raises_the_documented_error(workbook):
    t = trace.call(workbook.all_reduce, torch.arange(10, dtype=torch.int32))
    assert trace.dispatch_table(workbook.all_reduce)["AutogradCPU"].fallthrough
    assert t.predicted_path == t.recorded_path == ["CPU"]
    assert t.result.grad_fn is None and not t.result.requires_grad
    with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad and does not have a grad_fn"):
        t.result.backward()


def test_in_place_add_bumps_the_version_counter(workbook):
    x = torch.zeros(3)
    before = x._version
    assert workbook.add_(x, torch.ones(3)) is x
    assert x._version == before + 1 and torch.equal(x, torch.ones(3))


def test_out_variant_bumps_the_version_of_out(workbook):
    out = torch.empty(3)
    before = out._version
    assert workbook.add_out(torch.ones(3), torch.ones(3), out=out) is out
    assert out._version == before + 1 and torch.equal(out, torch.full((3,), 2.0))


def test_modifying_a_saved_tensor_in_place_is_caught_by_autograd(workbook):
    a = torch.randn(3, 3, requires_grad=True)
    y = a * 2
    z = y.sin()  # saves y for backward
    workbook.add_(y, torch.ones(3, 3))
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()


def test_in_place_path_visits_our_ad_inplace_or_view_kernel(workbook):
    t = trace.call(workbook.add_, torch.zeros(2), torch.ones(2))
    # The Autograd kernel has nothing to record and redispatches below itself, so ADInplaceOrView still bumps.
    assert t.recorded_path == ["AutogradCPU", "ADInplaceOrView", "CPU"] and t.agrees
