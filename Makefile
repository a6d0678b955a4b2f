# Quick start: `make demo` and `make test`. Everything installs into .venv.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PACKAGES := servekit jobrunner marks
DIST   ?= dist

EXT_STAMP := extension/node_modules/.installed

.PHONY: dev test lint format demo bench bench-hostile dist system clean test-cgroup2 test-container extension

$(STAMP): pyproject.toml $(foreach p,$(PACKAGES),packages/$(p)/pyproject.toml)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check --upgrade "pip>=25.1"
	$(BIN)/python -m pip install -q --disable-pip-version-check \
		$(foreach p,$(PACKAGES),-e packages/$(p)) --group dev
	touch $@

dev: $(STAMP)

system:
	@bash ci/system-packages.sh

# The extension's npm tools (web-ext), pinned by extension/package-lock.json.
$(EXT_STAMP): extension/package.json extension/package-lock.json
	cd extension && npm ci --no-audit --no-fund --loglevel=error
	touch $@

extension: dev $(EXT_STAMP)
	$(BIN)/python extension/build.py $(DIST)

test: dev system $(EXT_STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# The sandbox tests on a cgroup-v2-only kernel in a qemu VM (root; slow under TCG; not in `test`).
test-cgroup2: dev
	@bash ci/system-packages.sh ci/vm-packages.txt
	bash ci/cgroup2-vm.sh

# deploy/Containerfile built and run with Debian's podman, one job through it (root, a cgroup v2
# host; not in `test`). CONTAINER_BASE names the base image (default Debian's from docker.io).
test-container: dist
	@bash ci/system-packages.sh ci/vm-packages.txt
	@bash ci/system-packages.sh ci/container-packages.txt
	bash ci/container-test.sh

lint: dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: dev
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

demo: dev
	$(BIN)/python ci/demo.py

bench: dev
	$(BIN)/python benchmarks/run.py $(BENCH_ARGS)

# jobrunner under a bounded hostile mix on loopback for 60 s (issues 10, 22; needs root for nsjail).
bench-hostile: dev
	$(BIN)/python benchmarks/hostile.py $(BENCH_SECONDS)

dist: dev
	rm -rf $(DIST)
	$(foreach p,$(PACKAGES),$(BIN)/python -m build --no-isolation --wheel --outdir $(DIST) packages/$(p) >/dev/null &&) true
	@ls -1 $(DIST)

clean:
	rm -rf $(VENV) dist .pytest_cache .ruff_cache .hypothesis extension/node_modules
