import matplotlib
import pytest
import torch

# Figures render off-screen here. (Not MPLBACKEND: notebook kernels started by nbval would inherit it.)
matplotlib.use("Agg")

from helpers import build


@pytest.fixture(scope="session")
def workbook():
    """The schemas and the CPU, Meta, composite and autograd kernels, loaded once for the test session."""
    for layer in ("schemas", "cpu", "meta", "composite", "autograd"):
        build.load(layer)
    return torch.ops.workbook
