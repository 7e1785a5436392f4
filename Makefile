# Two commands do all set-up: `make demo` and `make test`. Each creates .venv if missing.
# `make test`: lint, format check, types (mypy), the strict docs build, then the test suite.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
EXTRAS := serve,jobs,tail,dev,docs

.PHONY: demo test lint format clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch is pinned here (a CPU wheel lies on disk); a looser range would pull a CUDA build.
	$(BIN)/python -m pip install --quiet "torch==2.13.0"
	$(BIN)/python -m pip install --quiet -e ".[$(EXTRAS)]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/hetsched demo --out runs/demo

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	DISABLE_MKDOCS_2_WARNING=true NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet \
		--site-dir $${TMPDIR:-/tmp}/hetsched-site-$$(id -u)
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format . && $(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) runs .pytest_cache
