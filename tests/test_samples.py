"""helpers/samples.py has one row per operator of csrc/schemas.cpp, and each row speaks of that operator's arguments.

tests/test_ops.py, test_autograd.py and test_cuda.py, lesson 06's opcheck table and the installed wheel's check all
take their operators from that table: an operator without a row would be tested by none of them, silently. These
tests fail instead, and say what to add where (csrc/README.md has every step of adding an operator)."""

import re
from pathlib import Path

import torch

from helpers import samples


def operators_of_schemas_cpp():
    """The workbook operators the loaded library declared in csrc/schemas.cpp, as the dispatcher records them (each
    schema's registration names its file: a pitfall's TORCH_LIBRARY_FRAGMENT adds operators to the namespace too)."""
    names = set()
    for qualified in torch._C._dispatch_get_all_op_names():
        namespace, _, name = qualified.partition("::")
        registered = re.search(r"^debug: registered at (.+):\d+$", torch._C._dispatch_dump(qualified), re.MULTILINE)
        if namespace == "workbook" and registered and Path(registered[1]).name == "schemas.cpp":
            names.add(name)
    return names


def test_the_table_has_a_row_for_every_operator_of_schemas_cpp_and_no_other(workbook):
    declared, rows = operators_of_schemas_cpp(), set(samples.OPS)
    assert declared, "no operator of csrc/schemas.cpp is loaded: the `workbook` fixture loads the library"
    assert not declared - rows, (
        f"csrc/schemas.cpp declares {sorted(declared - rows)}, which helpers/samples.py's OPS has no row for. Add one "
        "per operator: its dtypes, sample calls, torch reference, differentiable arguments and bad inputs "
        "(csrc/README.md, step 3). Until then no test, no opcheck of lesson 06 and no check of the wheel runs it.")
    assert not rows - declared, (
        f"helpers/samples.py's OPS has rows for {sorted(rows - declared)}, which csrc/schemas.cpp does not declare: "
        "remove the rows, or add the operators' m.def(...) to csrc/schemas.cpp.")


def test_the_schemas_the_table_reads_are_the_librarys(workbook):
    # samples.SCHEMAS parses csrc/schemas.cpp's m.def lines (it needs no library): the same schemas as the loaded ones.
    loaded = {name: str(getattr(workbook, name).default._schema) for name in operators_of_schemas_cpp()}
    assert {name: f"workbook::{schema}" for name, schema in samples.SCHEMAS.items()} == loaded


def test_every_row_speaks_of_its_operators_arguments():
    for name, op in samples.OPS.items():
        arguments = samples.arguments(name)
        assert op.dtypes and set(op.devices) <= {"cpu", "meta", "cuda"}, name
        assert set(op.differentiable) <= set(arguments), f"{name}: differentiable {op.differentiable}, not {arguments}"
        bad_calls = [(args, kwargs) for args, kwargs, _ in samples.bad_inputs(name).values()]
        for args, kwargs in samples.inputs(name, op.dtypes[0]) + bad_calls:
            assert len(args) <= len(arguments) and set(kwargs) <= set(arguments[len(args):]), (name, args, kwargs)
