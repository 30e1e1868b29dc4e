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
