"""csrc/schemas.cpp: every operator's declared schema, aliasing included."""

import pytest
import torch

EXPECTED = {
    "add": "workbook::add(Tensor self, Tensor other) -> Tensor",
    "add_": "workbook::add_(Tensor(a!) x, Tensor other) -> Tensor(a!)",
    "add_out": "workbook::add_out(Tensor x, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
    "sum": "workbook::sum(Tensor self, *, ScalarType? dtype=None) -> Tensor",
    "all_reduce": "workbook::all_reduce(Tensor self) -> Tensor",
    "matmul": "workbook::matmul(Tensor self, Tensor other) -> Tensor",
    "row": "workbook::row(Tensor(a) self, int index) -> Tensor(a)",
    "affine": "workbook::affine(Tensor self, Tensor weight, Tensor bias) -> Tensor",
    "mean": "workbook::mean(Tensor self) -> Tensor",
}


def test_the_namespace_holds_exactly_these_ops(workbook):
    names = {n.split("::")[1] for n in torch._C._dispatch_get_all_op_names() if n.startswith("workbook::")}
    assert names == set(EXPECTED)


@pytest.mark.parametrize("name", EXPECTED)
def test_schema(workbook, name):
    assert str(getattr(workbook, name).default._schema) == EXPECTED[name]


@pytest.mark.parametrize("name, mutated, tag", [("add_", "x", torch.Tag.inplace), ("add_out", "out", torch.Tag.out)])
def test_mutating_ops_declare_what_they_write_and_return_it_with_a_tag(workbook, name, mutated, tag):
    # Returning a mutated input needs the tag (lesson 03): without it torch.compile cannot functionalize the call.
    op = getattr(workbook, name).default
    written = [a for a in op._schema.arguments if a.alias_info is not None and a.alias_info.is_write]
    assert [a.name for a in written] == [mutated] and op._schema.is_mutable
    assert [r.alias_info.before_set for r in op._schema.returns] == [written[0].alias_info.before_set]
    assert op.tags == [tag]


def test_no_mutable_op_names_an_argument_self(workbook):
    # auto_functionalized takes a mutable op's arguments by name, and warns that `self` is ambiguous there.
    for name in EXPECTED:
        schema = getattr(workbook, name).default._schema
        assert not (schema.is_mutable and any(a.name == "self" for a in schema.arguments)), schema


def test_row_returns_an_alias_of_self(workbook):
    schema = workbook.row.default._schema
    assert schema.arguments[0].alias_info.before_set == schema.returns[0].alias_info.before_set == {"a"}
    assert not schema.is_mutable


def test_sum_dtype_is_keyword_only_and_optional(workbook):
    dtype = workbook.sum.default._schema.arguments[1]
    assert dtype.kwarg_only and dtype.default_value is None
    assert workbook.sum(torch.ones(3, dtype=torch.int32), dtype=torch.int32).dtype == torch.int32



def test_a_kernel_registered_again_replaces_the_old_one_and_warns_at_most_once_per_process_never_for_meta():
    # Lesson 01, section 5: a TORCH_LIBRARY_IMPL file loaded again replaces its kernels, and the warning is no guide.
    # OperatorEntry::registerKernel warns with TORCH_WARN_ONCE and skips the Meta key. In a CUDA wheel with Triton,
    # `import torch` spends that one warning itself: torch/_native replaces aten::bmm's CUDA kernel, with the warning
    # filtered out (torch/_native/__init__.py, the same in 2.13, 2.14 and 2.15; the override registers only when
    # triton_utils finds a CUDA build and Triton), so no later override warns. Measured: 2.13.0+cpu warns once,
    # 2.14.1+cu130 and 2.15.0+cu132 (both with Triton) never. aten's sin and cos have C++ CPU and Meta kernels, which a
    # Python registration overrides through the same registerKernel. In a process of its own: the overrides must not
    # outlive the test.
    from helpers import isolated

    done = isolated.run("""
        import importlib.util
        import warnings
        import torch

        lib = torch.library.Library("aten", "IMPL")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            lib.impl("sin", lambda x: torch.full_like(x, 7.0), "Meta")
            print("after Meta:", len(caught))
            lib.impl("sin", lambda x: torch.full_like(x, 7.0), "CPU")
            print("after sin on CPU:", len(caught))
            lib.impl("cos", lambda x: torch.full_like(x, 8.0), "CPU")
            print("after cos on CPU:", len(caught))
        print("calls:", torch.sin(torch.zeros(2)).tolist(), torch.cos(torch.zeros(2)).tolist())
        print("warning:", [line.strip() for message in caught for line in str(message.message).splitlines()[:2]])
        print("cuda build:", torch.version.cuda is not None)
        print("triton:", importlib.util.find_spec("triton") is not None)
    """)
    assert done.returncode == 0, done.stderr[-2000:]
    spent_at_import = "cuda build: True" in done.stdout and "triton: True" in done.stdout
    warned = 0 if spent_at_import else 1
    assert done.stdout.splitlines()[:4] == [
        "after Meta: 0",
        f"after sin on CPU: {warned}",
        f"after cos on CPU: {warned}",
        "calls: [7.0, 7.0] [8.0, 8.0]",
    ], done.stdout
    if warned:
        assert ("warning: ['Warning only once for all operators,  other operators may also be overridden.', "
                "'Overriding a previously registered kernel for the same operator and the same dispatch key']"
                ) in done.stdout, done.stdout
