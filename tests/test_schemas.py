"""csrc/schemas.cpp: every operator's declared schema, aliasing included."""

import pytest
import torch

EXPECTED = {
    "add": "workbook::add(Tensor self, Tensor other) -> Tensor",
    "add_": "workbook::add_(Tensor(a!) self, Tensor other) -> ()",
    "add_out": "workbook::add_out(Tensor self, Tensor other, *, Tensor(a!) out) -> ()",
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


@pytest.mark.parametrize("name, mutated", [("add_", "self"), ("add_out", "out")])
def test_mutating_ops_declare_what_they_write(workbook, name, mutated):
    schema = getattr(workbook, name).default._schema
    written = [a.name for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write]
    assert written == [mutated] and schema.is_mutable and not schema.returns


def test_row_returns_an_alias_of_self(workbook):
    schema = workbook.row.default._schema
    assert schema.arguments[0].alias_info.before_set == schema.returns[0].alias_info.before_set == {"a"}
    assert not schema.is_mutable


def test_sum_dtype_is_keyword_only_and_optional(workbook):
    dtype = workbook.sum.default._schema.arguments[1]
    assert dtype.kwarg_only and dtype.default_value is None
    assert workbook.sum(torch.ones(3, dtype=torch.int32), dtype=torch.int32).dtype == torch.int32
