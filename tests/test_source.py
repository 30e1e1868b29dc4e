"""helpers/source.py shows the block a lesson names, and only that one: a name shared by two lines, or by none, is an
error, never the first of several."""

import pytest

from helpers import source

FILE = """\
at::Tensor add_(at::Tensor& self) {
  return self;
}

at::Tensor add(const at::Tensor& self) {
  return self;
}

TORCH_LIBRARY_IMPL(workbook, CPU, m) {
}
"""


@pytest.fixture
def csrc(tmp_path, monkeypatch):
    (tmp_path / "ops.cpp").write_text(FILE)
    monkeypatch.setattr(source, "CSRC", tmp_path)


def test_a_block_is_the_one_named_not_one_that_shares_its_prefix(csrc):
    assert source.show("ops.cpp", "at::Tensor add").data.splitlines()[0] == "at::Tensor add(const at::Tensor& self) {"
    assert source.show("ops.cpp", "at::Tensor add_(").data.splitlines()[0] == "at::Tensor add_(at::Tensor& self) {"


def test_a_name_no_line_or_several_lines_start_with_is_refused(csrc):
    with pytest.raises(ValueError, match="0 lines of csrc/ops.cpp start with 'TORCH_LIBRARY', not one"):
        source.show("ops.cpp", "TORCH_LIBRARY")  # TORCH_LIBRARY_IMPL is another macro
    with pytest.raises(ValueError, match=r"2 lines of csrc/ops.cpp start with 'at::Tensor', not one\n  line 1: "):
        source.show("ops.cpp", "at::Tensor")
