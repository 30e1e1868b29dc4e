# Two commands do everything (see README):
#   make lab   - create .venv if missing, open JupyterLab on the notebooks
#   make test  - create .venv if missing, run the unit tests and every notebook under nbval
PYTHON ?= python3
# `make test TORCH=2.13.0` (any release): the same environment.yml with that torch instead of the pinned one, in a
# venv of its own (.venv-2.13.0), and the whole test command run there. Compiled layers are keyed by torch's
# version (build/), so both venvs share the checkout without rebuilding each other's.
TORCH  ?=
VENV   := $(if $(TORCH),.venv-$(TORCH),.venv)
BIN    := $(VENV)/bin
# Three workers on CI's two cores: each spends part of its time waiting (for a notebook kernel, a compiler, a
# child process), and a third keeps both cores busy (with the fork server, -n 2 and -n 3 are about even warm).
# A notebook stays on one worker (loadfile); files go out in the order the root conftest.py sets (no reordering).
PYTEST_ARGS ?= -n 3 --dist loadfile --no-loadscope-reorder
# The test command's processes (workers, checks, kernels: several hundred) import the workbook's modules from their
# compiled .pyc (__pycache__/, ignored by git), even where the environment says not to write them.
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest

.PHONY: lab test unit notebooks execute bench browser-check clean

# The environment is rebuilt when environment.yml changes. Its pip: list is the requirements file.
$(VENV)/.installed: environment.yml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	awk -v torch="$(TORCH)" '/^ *- pip:/ {in_pip=1; next} in_pip && /^ *- / {sub(/^ *- /, ""); \
		if (torch != "" && $$1 ~ /^torch==/) $$1 = "torch==" torch; print}' environment.yml > $(VENV)/requirements.txt
	# pip byte-compiles on one core (~30 s of the install); compileall does it on all of them. Files it
	# cannot compile (Python 2 test data inside some packages) are skipped by pip too, hence the `|| true`.
	# The pins are also the only constraints: a machine-wide pip constraint (some managed machines cap torch
	# below the pin) would otherwise refuse the pinned torch. PIP_CONSTRAINT replaces any from pip's config files.
	PIP_CONSTRAINT=$(VENV)/requirements.txt $(BIN)/python -m pip install --quiet --disable-pip-version-check \
		--no-compile -r $(VENV)/requirements.txt
	$(BIN)/python -m compileall -qq -j 0 $$($(BIN)/python -c "import site; print(site.getsitepackages()[0])") || true
	# Put the checkout on sys.path so notebooks, tests and benchmarks can `import helpers`.
	$(BIN)/python -c "import os, site; open(os.path.join(site.getsitepackages()[0], 'dispatcher_workbook.pth'), 'w').write(os.getcwd() + '\n')"
	touch $@

# The project's JupyterLab settings (.jupyter/settings: no news pop-up). Jupyter refuses to run as root
# unless told; containers often run as root.
lab: $(VENV)/.installed
	$(BIN)/jupyter lab notebooks/ --LabApp.app_settings_dir=$(CURDIR)/.jupyter/settings $(if $(filter 0,$(shell id -u)),--allow-root)

test: $(VENV)/.installed
	$(PYTEST) $(PYTEST_ARGS)

# Subsets while developing: `make unit`, `make notebooks NB=notebooks/01_schemas.ipynb`.
unit: $(VENV)/.installed
	$(PYTEST) $(PYTEST_ARGS) tests

NB ?= notebooks
notebooks: $(VENV)/.installed
	$(PYTEST) $(PYTEST_ARGS) $(NB)

# Re-run notebooks top to bottom and store their outputs (do this before committing a notebook).
execute: $(VENV)/.installed
	$(BIN)/python -m helpers.execute $(if $(filter notebooks,$(NB)),notebooks/*.ipynb,$(NB))

# A lesson run through JupyterLab's UI in headless Chromium (Debian: apt install chromium); see .ci/browser_check.py.
LESSON ?= 00_dispatcher_tour
browser-check: $(VENV)/.installed
	$(BIN)/python .ci/browser_check.py $(LESSON)

bench: $(VENV)/.installed
	$(BIN)/python -m bench.kernels
	$(BIN)/python -m bench.composition
	$(BIN)/python -m bench.dispatch_cost
	$(BIN)/python -m bench.device
	$(BIN)/python -m bench.build_times

clean:
	rm -rf build
