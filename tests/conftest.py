import matplotlib
import pytest
import torch

# Figures render off-screen here. (Not MPLBACKEND: notebook kernels started by nbval would inherit it.)
matplotlib.use("Agg")

from helpers import build


@pytest.fixture(scope="session")
def workbook():
    """The schemas and the CPU, Meta and composite kernels, loaded once for the whole test session."""
    for layer in ("schemas", "cpu", "meta", "composite"):
        build.load(layer)
    return torch.ops.workbook
