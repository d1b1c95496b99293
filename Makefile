# One front door for people and CI. Run as root on Debian 12. A minimal Debian 12 has no make:
# run `bash tools/install-deps` first (it needs only bash and apt and installs make).
#   make demo   install what is missing, build, run the demo
#   make test   install what is missing, build, run every test (what .ci/run does)

VENV      ?= .venv
BUILD     ?= build
PY        := $(VENV)/bin/python
STAMP     := $(VENV)/.deps-stamp
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=RelWithDebInfo -DXLATBENCH_WERROR=ON

.PHONY: all deps build test test-cpp test-py lint demo clean

all: build

$(STAMP): tools/install-deps pyproject.toml
	tools/install-deps
	touch $@

deps: $(STAMP)

build: $(STAMP)
	cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS)
	cmake --build $(BUILD)

test-cpp: build
	ctest --test-dir $(BUILD) --output-on-failure

test-py: build
	XLATBENCH_BUILD=$(abspath $(BUILD)) $(VENV)/bin/pytest -ra

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	shellcheck tools/install-deps tools/build-tayga .ci/run $(wildcard tools/*.sh)

test: lint test-cpp test-py

demo: build
	XLATBENCH_BUILD=$(abspath $(BUILD)) $(VENV)/bin/xlatbench demo

clean:
	rm -rf $(BUILD)
