"""workbook_stable::add (add.cpp, LibTorch's stable ABI) as a package of its own, built once for many torch releases.

    pip wheel --no-build-isolation --no-deps csrc/stable -w dist/    # needs torch (2.10 or later) installed
    pip install dist/workbook_stable-*.whl

add.cpp defines TORCH_TARGET_VERSION (2.10) before any torch header: the stable headers then offer only what torch
2.10 had, and every non-stable header is an #error. The library calls torch through its C shim alone, so the wheel
asks for torch>=2.10, not for the torch it was built with (csrc/package, built against torch's C++ ABI, must).
"""

from pathlib import Path

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

HERE = Path(__file__).resolve().parent

setup(
    name="workbook_stable",
    version="0.1.0",
    packages=["workbook_stable"],
    ext_modules=[CppExtension("workbook_stable._C", [str(HERE / "add.cpp")],
                              # -O3 for speed, -g0 for size (Python's build flags add -g), as csrc/package does. No
                              # -fopenmp: torch::stable::parallel_for runs on torch's own thread pool, through the shim.
                              extra_compile_args={"cxx": ["-O3", "-g0"]}, py_limited_api=True)],
    install_requires=["torch>=2.10"],
    cmdclass={"build_ext": BuildExtension},
    options={"bdist_wheel": {"py_limited_api": "cp310"}},
)
