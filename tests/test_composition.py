"""Lesson 06: torch.compile, torch.export and torch.vmap against eager; the Python custom operators of
helpers/python_ops.py. (opcheck of every operator, with and without gradients, is lesson 06's table: see
conftest.py.)"""

import io

import pytest
import torch
from torch._dynamo.testing import CompileCounterWithBackend
from torch.autograd import gradcheck
from torch.library import opcheck

from bench import composition
from helpers import isolated, python_ops, samples, trace

# ---- torch.compile and torch.export ----------------------------------------------------------


def test_compile_fullgraph_has_no_graph_break_and_matches_eager_with_gradients(workbook):
    model, x = samples.TinyMLP(), torch.randn(6, 32)
    explanation = torch._dynamo.explain(model)(x)
    assert (explanation.graph_count, explanation.graph_break_count) == (1, 0)
    # aot_eager: the fake-tensor and AOTAutograd tracing (what needs the registrations), without Inductor's codegen,
    # which lesson 06 runs.
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    eager_out, compiled_out = model(x), compiled(x)
    torch.testing.assert_close(compiled_out, eager_out)
    eager_grads = torch.autograd.grad(eager_out.sum(), list(model.parameters()))
    compiled_grads = torch.autograd.grad(compiled_out.sum(), list(model.parameters()))
    for ours, reference in zip(compiled_grads, eager_grads):
        torch.testing.assert_close(ours, reference)


def test_export_keeps_each_op_as_one_node_and_survives_save_and_load(workbook):
    model, x = samples.TinyMLP(), torch.randn(6, 32)
    exported = torch.export.export(model, (x,))
    targets = [str(node.target) for node in exported.graph.nodes if node.op == "call_function"]
    assert "workbook.affine.default" in targets and "workbook.matmul.default" in targets
    buffer = io.BytesIO()
    torch.export.save(exported, buffer)
    buffer.seek(0)
    loaded = torch.export.load(buffer)
    with torch.no_grad():
        torch.testing.assert_close(loaded.module()(x), model(x))


# ---- torch.vmap ------------------------------------------------------------------------------

IN_DIMS = [(0, None), (None, 0), (0, 0), (1, None), (None, 2)]


def vmap_inputs(in_dims, batch=5):
    generator = torch.Generator().manual_seed(0)
    shapes = [(4, 6), (6, 3)]
    args = []
    for shape, dim in zip(shapes, in_dims):
        t = torch.randn(shape, generator=generator)
        args.append(t if dim is None else torch.stack([t * (i + 1) for i in range(batch)], dim=dim))
    return args


@pytest.fixture
def batching_rule():
    """matmul's batching rule, registered for one test only."""
    rule = python_ops.register_matmul_batching_rule()
    yield
    rule._destroy()


# The loop's warning is what it should be (lesson 06); from torch 2.15 it is a Python warning, and pytest would list it.
@pytest.mark.filterwarnings("ignore:There is a performance drop because we have not yet implemented the batching rule")
@pytest.mark.parametrize("in_dims", IN_DIMS, ids=str)
def test_vmap_without_a_rule_loops_and_is_right(workbook, in_dims):
    args = vmap_inputs(in_dims)
    with trace.recording() as events:
        result = torch.vmap(workbook.matmul, in_dims=in_dims)(*args)
    torch.testing.assert_close(result, torch.vmap(torch.mm, in_dims=in_dims)(*args))
    assert [e.key for e in events].count("CPU") == 5  # one call per example


@pytest.mark.parametrize("in_dims", IN_DIMS, ids=str)
def test_vmap_with_the_rule_gives_the_same_values_in_fewer_calls(workbook, batching_rule, in_dims):
    args = vmap_inputs(in_dims)
    with trace.recording() as events:
        result = torch.vmap(workbook.matmul, in_dims=in_dims)(*args)
    torch.testing.assert_close(result, torch.vmap(torch.mm, in_dims=in_dims)(*args))
    assert [e.key for e in events].count("CPU") == (5 if in_dims == (0, 0) else 1)


def test_the_rule_goes_with_its_library(workbook):
    # What the batching_rule fixture relies on: after _destroy(), torch's fallback is back.
    rule = python_ops.register_matmul_batching_rule()
    assert trace.dispatch_table(workbook.matmul)["FuncTorchBatched"].where.startswith("python_ops.py:")
    rule._destroy()
    assert trace.dispatch_table(workbook.matmul)["FuncTorchBatched"].kind == "backend fallback"


# ---- the Python custom operators -------------------------------------------------------------


@pytest.mark.parametrize("requires_grad", [False, True])
@pytest.mark.parametrize("name", ["add", "matmul"])
def test_python_ops_pass_opcheck_and_match_the_cpp_ops(workbook, name, requires_grad):
    args = {case: args for case, args, _ in samples.every_op(requires_grad)}[name]
    python_op = getattr(torch.ops.workbook_py, name)
    opcheck(python_op.default, args)
    torch.testing.assert_close(python_op(*args), getattr(workbook, name)(*args))


@pytest.mark.parametrize("name", ["add", "matmul"])
def test_python_ops_gradcheck(name):
    generator = torch.Generator().manual_seed(0)
    shapes = {"add": [(3, 4), (3, 4)], "matmul": [(3, 5), (5, 2)]}[name]
    args = [torch.randn(s, generator=generator, dtype=torch.float64, requires_grad=True) for s in shapes]
    assert gradcheck(getattr(torch.ops.workbook_py, name), args)


@pytest.mark.parametrize("call, message", [
    (lambda: torch.ops.workbook_py.add(torch.ones(2, 3), torch.ones(3, 2)), "workbook_py::add: shapes"),
    (lambda: torch.ops.workbook_py.add(torch.ones(2), torch.ones(2, dtype=torch.float64)), "workbook_py::add: dtypes"),
    (lambda: torch.ops.workbook_py.matmul(torch.ones(2, 3, 4), torch.ones(4, 2)), "must be 2-D"),
    (lambda: torch.ops.workbook_py.matmul(torch.ones(2, 3), torch.ones(2, 3)), r"workbook_py::matmul: torch.Size"),
])
def test_python_ops_refuse_bad_inputs(call, message):
    with pytest.raises(RuntimeError, match=message):
        call()


# ---- a Meta kernel that reads sizes() (lesson 06, section 5) -------------------------------------


def test_a_meta_kernel_that_reads_sizes_passes_opcheck_but_compiles_once_per_size_and_refuses_a_dim():
    # Its own process: the layer adds workbook::matmul_sizes, which test_schemas' list of the namespace must not see.
    # The same in torch 2.13.0, 2.14.1 and 2.15.0: no error anywhere until export is given a Dim.
    done = isolated.run("""
        import torch
        from torch._dynamo.testing import CompileCounterWithBackend
        from torch.library import opcheck
        from helpers import build
        build.load_all("schemas", "cpu", "meta", "autograd", "meta_sizes")
        a, weight = torch.randn(4, 8), torch.randn(8, 5)
        for name in ("matmul", "matmul_sizes"):
            op = getattr(torch.ops.workbook, name)
            opcheck(op.default, (a, weight))
            torch._dynamo.reset()
            counter = CompileCounterWithBackend("aot_eager")
            compiled = torch.compile(lambda x, w: op(x, w), backend=counter, dynamic=True, fullgraph=True)
            for rows in (4, 9, 17):
                x = torch.randn(rows, 8)
                torch.testing.assert_close(compiled(x, weight), x @ weight)

            class Module(torch.nn.Module):
                def forward(self, x, w):
                    return op(x, w)

            try:
                dims = {"x": {0: torch.export.Dim("batch")}, "w": None}
                torch.export.export(Module(), (a, weight), dynamic_shapes=dims)
                exported = "exported"
            except torch._dynamo.exc.UserError as error:
                exported = "specialized it to be a constant (4)" in str(error) and "refused"
            print(name, counter.frame_count, exported)
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["matmul 1 exported", "matmul_sizes 3 refused"]


@pytest.mark.parametrize("size_type, compiles", [("int", 3), ("SymInt", 1)])
def test_a_size_argument_declared_int_specializes_and_symint_does_not(size_type, compiles):
    with torch.library._scoped_library("workbook_test", "FRAGMENT") as library:
        library.define(f"first_rows(Tensor x, {size_type} n) -> Tensor")
        library.impl("first_rows", lambda x, n: x[:n].clone(), "CompositeExplicitAutograd")
        torch.library.register_fake("workbook_test::first_rows", lambda x, n: x.new_empty(n, *x.shape[1:]), lib=library)
        torch._dynamo.reset()
        counter = CompileCounterWithBackend("aot_eager")
        first_half = torch.compile(lambda x: torch.ops.workbook_test.first_rows(x, x.shape[0] // 2), backend=counter,
                                   dynamic=True, fullgraph=True)
        for rows in (4, 10, 18):
            x = torch.arange(rows * 3.0).view(rows, 3)
            torch.testing.assert_close(first_half(x), x[: rows // 2])
        assert counter.frame_count == compiles


def test_the_vmap_timing_interleaves_both_ways_and_calls_a_speedup_only_above_the_noise(workbook):
    times = composition.vmap_millis(batch=8, rounds=2, seconds_per_sample=0.001)
    assert {name: len(samples) for name, samples in times.items()} == {"fallback loop": 2, "batching rule": 2}
    assert trace.dispatch_table(workbook.matmul)["FuncTorchBatched"].kind == "backend fallback"  # the rule is gone
    assert composition.speedup([4.0, 4.1, 3.9, 4.2], [1.0, 1.0, 1.1, 1.0]).startswith("4.0x (")
    assert composition.speedup([1.0, 1.2, 0.9, 1.1], [1.1, 1.0, 1.0, 1.0]) == "within noise here"
