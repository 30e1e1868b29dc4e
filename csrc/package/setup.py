"""The workbook's operators as an installable package, in the shape of pytorch/extension-cpp.

    pip wheel --no-build-isolation --no-deps csrc/package -w dist/    # needs torch installed
    pip install dist/workbook_ops-*.whl

One shared library, workbook_ops/_C.abi3.so, built from every csrc/*.cpp file (lesson 01's schemas,
then one file per dispatch key), plus workbook_ops/__init__.py, which loads it. Lessons 00-07 compile
the same files one layer at a time, at run time; here they are compiled once, at build time.
"""

import os
import subprocess
from pathlib import Path

import torch
from setuptools import setup
from setuptools.command.build_py import build_py
from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CppExtension, CUDAExtension

CSRC = Path(__file__).resolve().parent.parent
sources = sorted(str(path) for path in CSRC.glob("*.cpp"))


def openmp_flags() -> list[str]:
    """-fopenmp where the compiler has OpenMP (g++; clang with libomp-dev): at::parallel_for, which cpu.cpp's kernels
    use, is a header template over `#pragma omp parallel`, and without the flag it runs on one thread."""
    probe = subprocess.run([os.environ.get("CXX", "c++"), "-fopenmp", "-fsyntax-only", "-x", "c++", "-"],
                           input="#include <omp.h>\n", capture_output=True, text=True)
    return ["-fopenmp"] if probe.returncode == 0 else []


# The CUDA kernels only where they can be built and run, as extension-cpp does.
use_cuda = torch.cuda.is_available() and CUDA_HOME is not None
if use_cuda:
    sources.append(str(CSRC / "cuda.cu"))

extension = (CUDAExtension if use_cuda else CppExtension)(
    "workbook_ops._C",
    sources,
    include_dirs=[str(CSRC)],
    # -O3 for speed. -g0: no debug information, which Python's own build flags ask for with -g (the library is
    # 30x smaller and compiles a third faster). No -march and no AVX flags: a wheel runs on machines other than
    # the one that built it (torch compiles each of its kernels once per CPU capability and picks one at run
    # time). -fopenmp where the compiler has it (above).
    extra_compile_args={"cxx": ["-O3", "-g0", *openmp_flags()], "nvcc": ["-O3"]},
    extra_link_args=openmp_flags(),
    # The library uses no CPython API at all (torch.ops.load_library loads it; nothing imports it), so one wheel
    # serves every CPython from 3.10 on that torch runs on. For such an extension torch's BuildExtension defines
    # Py_LIMITED_API=0x030A0000 (3.10), and the compiler holds us to it. (torch 2.15 itself needs Python 3.11.)
    py_limited_api=True,
)


# A pin on torch cannot say which CUDA the kernels were compiled for (setup(), below): the package checks it.
class BuildPyRecordingCuda(build_py):
    """Also writes workbook_ops/_built_for.py into the wheel: the CUDA the kernels were compiled for (None without CUDA
    kernels), whose major version __init__.py compares with torch.version.cuda's before it loads the library, as
    torchvision does."""

    def run(self):
        super().run()
        cuda = torch.version.cuda if use_cuda else None
        target = Path(self.build_lib) / "workbook_ops" / "_built_for.py"
        target.write_text(f"CUDA = {cuda!r}  # written by setup.py\n")


setup(
    name="workbook_ops",
    version="0.1.0",
    packages=["workbook_ops"],
    ext_modules=[extension],
    # Built against torch's regular C++ ABI, the library runs with the torch it was built with, and no other. The pin
    # is the release's public version: PyPI's torch says 2.15.0 in its metadata, which pip reads, and 2.15.0+cu132 in
    # torch.__version__; a pin with the local part would refuse it. So the pin accepts every build of the release,
    # whatever its CUDA, and the package checks the CUDA itself when it loads (_built_for.py, above).
    install_requires=[f"torch=={torch.__version__.split('+')[0]}"],
    cmdclass={"build_ext": BuildExtension, "build_py": BuildPyRecordingCuda},
    options={"bdist_wheel": {"py_limited_api": "cp310"}},  # the wheel's tag: cp310-abi3
)
