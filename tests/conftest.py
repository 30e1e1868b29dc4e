import pytest
import torch

from helpers import build


@pytest.fixture(scope="session")
def workbook():
    """The schemas and CPU kernels, loaded once for the whole test session."""
    build.load("schemas")
    build.load("cpu")
    return torch.ops.workbook
