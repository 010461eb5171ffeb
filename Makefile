# nkic: `make run` compiles, simulates and checks a bundled kernel; `make test` runs lit + pytest.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lit pytest bench bench-compile fuzz clean

# The simulator runs many small matmuls, which a threaded BLAS only slows down (see tools/cli.py default_blas_threads).
export OPENBLAS_NUM_THREADS ?= 1

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/nkic demo --out-dir out/demo

# pytest-xdist runs the test files on every core (`--dist loadfile`: each file on one worker, in its own order, so
# module-level random generators draw the same data as in a serial run).
PYTEST_JOBS ?= auto

test: $(STAMP)
	$(BIN)/lit -q tests/filecheck
	$(BIN)/pytest -q -n $(PYTEST_JOBS) --dist loadfile

lit: $(STAMP)
	$(BIN)/lit -v tests/filecheck

pytest: $(STAMP)
	$(BIN)/pytest -q -n $(PYTEST_JOBS) --dist loadfile

bench: $(STAMP)
	$(BIN)/python bench/pipeline.py

# The long fuzz profiles (make test runs the quick ones): NEFF mutation, IR mutation through nkic-opt, random kernels
# against numpy. Counts: bench/README.md.
fuzz: $(STAMP)
	NKIC_FUZZ=long $(BIN)/pytest -q -s tests/unit/test_fuzz_neff.py tests/unit/test_fuzz_ir.py \
		tests/unit/test_fuzz_kernels.py

# Compile-time scaling table (bench/compile.py); add CASES="attn-16k" for the 16K attention (minutes).
bench-compile: $(STAMP)
	$(BIN)/python bench/compile.py $(CASES)

clean:
	rm -rf $(VENV) out *.egg-info
