import matplotlib
import pytest
import torch

# Figures render off-screen here. (Not MPLBACKEND: notebook kernels started by nbval would inherit it.)
matplotlib.use("Agg")

from helpers import build


@pytest.fixture(scope="session")
def workbook():
    """The schemas and CPU kernels, loaded once for the whole test session."""
    build.load("schemas")
    build.load("cpu")
    return torch.ops.workbook
