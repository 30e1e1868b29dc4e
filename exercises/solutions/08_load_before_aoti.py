"""Exercise 08.load_before_aoti (easy): run an AOTInductor package in production.

Write `run(model_pt2, x)`: load the .pt2 file of lesson 08 (its model calls workbook operators) and return the
model's output for `x`. The check runs it in a fresh Python in which only the installed wheel (`workbook_ops`) and
torch can be imported.
"""

import torch


def run(model_pt2: str, x: torch.Tensor) -> torch.Tensor:
    import workbook_ops  # noqa: F401 - registers the operators the package calls by name

    model = torch._inductor.aoti_load_package(model_pt2)
    return model(x)
