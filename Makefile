# Two commands do everything (see README):
#   make lab   - create .venv if missing, open JupyterLab on the notebooks
#   make test  - create .venv if missing, run the unit tests and every notebook under nbval
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# Tests and notebooks run two at a time on two cores; a notebook stays on one worker (loadfile).
PYTEST_ARGS ?= -n 2 --dist loadfile

.PHONY: lab test unit notebooks execute bench clean

# The environment is rebuilt when environment.yml changes. Its pip: list is the requirements file.
$(VENV)/.installed: environment.yml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	awk '/^ *- pip:/ {in_pip=1; next} in_pip && /^ *- / {sub(/^ *- /, ""); print}' environment.yml > $(VENV)/requirements.txt
	# pip byte-compiles on one core (~30 s of the install); compileall does it on all of them. Files it
	# cannot compile (Python 2 test data inside some packages) are skipped by pip too, hence the `|| true`.
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-compile -r $(VENV)/requirements.txt
	$(BIN)/python -m compileall -qq -j 0 $$($(BIN)/python -c "import site; print(site.getsitepackages()[0])") || true
	# Put the checkout on sys.path so notebooks, tests and benchmarks can `import helpers`.
	$(BIN)/python -c "import os, site; open(os.path.join(site.getsitepackages()[0], 'dispatcher_workbook.pth'), 'w').write(os.getcwd() + '\n')"
	touch $@

# Jupyter refuses to run as root unless told; containers often run as root.
lab: $(VENV)/.installed
	$(BIN)/jupyter lab notebooks/ $(if $(filter 0,$(shell id -u)),--allow-root)

test: $(VENV)/.installed
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# Subsets while developing: `make unit`, `make notebooks NB=notebooks/01_schemas.ipynb`.
unit: $(VENV)/.installed
	$(BIN)/python -m pytest $(PYTEST_ARGS) tests

NB ?= notebooks
notebooks: $(VENV)/.installed
	$(BIN)/python -m pytest $(PYTEST_ARGS) $(NB)

# Re-run notebooks top to bottom and store their outputs (do this before committing a notebook).
execute: $(VENV)/.installed
	$(BIN)/python -m helpers.execute $(if $(filter notebooks,$(NB)),notebooks/*.ipynb,$(NB))

bench: $(VENV)/.installed
	$(BIN)/python -m bench.kernels
	$(BIN)/python -m bench.composition
	$(BIN)/python -m bench.build_times

clean:
	rm -rf build
