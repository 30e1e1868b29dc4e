"""Check the installed operators where they are installed: `python -m workbook_ops.check SAMPLES.pt`.

SAMPLES.pt holds {requires_grad: [(operator name, args, kwargs), ...]} (torch.save). Each operator is called through
torch.library.opcheck, in this interpreter, which needs nothing but torch and this package; one line per case.
"""

import sys

import torch

import workbook_ops


def main(samples_path: str) -> None:
    for requires_grad, cases in torch.load(samples_path).items():
        for name, args, kwargs in cases:
            results = torch.library.opcheck(getattr(torch.ops.workbook, name).default, args, kwargs,
                                            raise_exception=False)
            failed = sorted(test for test, outcome in results.items() if outcome != "SUCCESS")
            print(f"{name:10} requires_grad={requires_grad!s:5}  {'FAILED ' + ', '.join(failed) if failed else 'passed'}")
    workbook = sorted(name for name in sys.modules if name.split(".")[0] in ("helpers", "bench"))
    print("modules of the workbook imported:", workbook or "none")
    print("operators loaded from:", workbook_ops.LIBRARY.relative_to(workbook_ops.LIBRARY.parents[1]))


if __name__ == "__main__":
    main(sys.argv[1])
