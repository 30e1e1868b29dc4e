"""Facts lesson 10 and its exercises state about torch at the Python key, pinned on every supported release."""

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map


def test_native_batch_norm_writes_running_stats_its_schema_does_not_mark():
    # 10.upcast_mode's task: a mode that hands kernels copies, and copies back what the schema marks (a!), loses
    # BatchNorm's running statistics: aten::native_batch_norm writes them without marking them.
    schema = torch.ops.aten.native_batch_norm.default._schema
    running_mean = next(argument for argument in schema.arguments if argument.name == "running_mean")
    assert running_mean.alias_info is None

    class Copies(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            copy = lambda value: value.clone() if isinstance(value, torch.Tensor) else value
            return func(*tree_map(copy, args), **tree_map(copy, kwargs or {}))

    norm = torch.nn.BatchNorm1d(3)
    norm(torch.randn(4, 3) + 5)
    assert norm.running_mean.abs().min() > 0.1  # without the mode: updated
    norm.reset_running_stats()
    with Copies():
        norm(torch.randn(4, 3) + 5)
    assert torch.equal(norm.running_mean, torch.zeros(3))  # with it: the copies were updated, not the module's
