# The two commands of the README's quick start: `make book` and `make test`.
# Both create a local virtual environment in .venv (Python 3.11 or newer) on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.ppbook-installed
# JupyterLab's settings for this environment, not the user's home: no news prompt on first start.
SETTINGS := $(VENV)/share/jupyter/lab/settings/overrides.json
START  := 00_start.ipynb
TORCH  ?= torch==2.13.0
HOST   ?= 127.0.0.1
PORT   ?= 8888
# Jupyter refuses to run as root unless told; containers and CI often are root.
ROOTOK := $(if $(filter 0,$(shell id -u)),--allow-root,)

.PHONY: book test install lint clean gpu-demo release-check site

install: $(STAMP) $(SETTINGS)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "ppbook needs Python 3.11 or newer, got " + sys.version.split()[0])'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch first, pinned to the wheel this machine carries; the project's own requirement is a range.
	$(BIN)/python -m pip install --quiet $(TORCH)
	# -qq: the build backend's notes on editable installs are not for the reader; errors still show.
	$(BIN)/python -m pip install -qq -e ".[test,site]"
	touch $(STAMP)

$(SETTINGS): jupyter/overrides.json $(STAMP)
	mkdir -p $(dir $@)
	cp jupyter/overrides.json $@

book: install
	@echo "Opening the book: JupyterLab on notebooks/ at http://$(HOST):$(PORT)/lab, starting at $(START) (token printed below)"
	$(BIN)/jupyter lab --no-browser --ip=$(HOST) --port=$(PORT) --ServerApp.root_dir=notebooks \
		--LabApp.default_url=/lab/tree/$(START) $(ROOTOK)

test: install
	$(BIN)/python -m pytest

# The book as a static website in _build/html/ (index.html first): every notebook executed
# once (kept in _build/executed/ and reused while nothing changed), Sphinx + MyST-NB, offline.
site: install
	$(BIN)/python site/build.py

# Every GPU check of chapter 9 in under 5 minutes on the GPUs present; its recording goes to
# data/gpu_demo/. Without a GPU it says so and writes nothing (benchmarks/gpu_demo.py).
gpu-demo: install
	$(BIN)/python benchmarks/gpu_demo.py

# The release a course can pin: sdist and wheel built, the wheel tried in a clean venv.
release-check: install
	bash .ci/release_check

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) build *.egg-info
