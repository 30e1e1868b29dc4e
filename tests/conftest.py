import matplotlib
import pytest
import torch

# Figures render off-screen here. (Not MPLBACKEND: notebook kernels started by nbval would inherit it.)
matplotlib.use("Agg")

from helpers import build


@pytest.fixture(scope="session")
def workbook():
    """Every CPU-side layer of the workbook, loaded once for the test session."""
    for layer in ("schemas", "cpu", "meta", "composite", "autograd", "fallthrough", "ad_inplace_or_view", "autocast"):
        build.load(layer)
    return torch.ops.workbook
