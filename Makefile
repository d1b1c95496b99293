# Run as root on Debian 12. The README's two commands, `bash tools/demo` and `bash tools/test` (what .ci/run
# calls), need only bash and apt: they install make and the rest first, then run `make demo` / `make test`.
#   make demo   install what is missing, build what the demo needs, run the demo
#   make test   install what is missing, build everything, run every test

VENV      ?= .venv
BUILD     ?= build
PY        := $(VENV)/bin/python
STAMP     := $(VENV)/.deps-stamp
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=RelWithDebInfo -DXLATBENCH_WERROR=ON

.PHONY: all deps build build-demo test test-cpp test-py test-hardening fuzz-reply fuzz-frame lint demo clean

all: build

$(STAMP): tools/install-deps pyproject.toml
	tools/install-deps
	touch $@

deps: $(STAMP)

build: $(STAMP)
	cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS)
	cmake --build $(BUILD)

# Only what the demo runs: the tester and the tc-BPF translator's object (not the tests, probes, man page).
build-demo: $(STAMP)
	cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS)
	cmake --build $(BUILD) --target xlatperf siit_bpf

test-cpp: build
	ctest --test-dir $(BUILD) --output-on-failure

test-py: build
	XLATBENCH_BUILD=$(abspath $(BUILD)) $(VENV)/bin/pytest -ra --durations=30

# Hardening of the tester: the reply classifier and the AF_XDP frame parser fuzzed (libFuzzer, seeded
# with real knotd replies, bare and in frames)
# for FUZZ_SECONDS, then the Catch2 and loopback end-to-end tests built with ASan+UBSan, then the
# ring/concurrency tests, the peer end-to-end tests (sender + receiver threads) and the two-queue AF_XDP
# test (two pairs matching each other's replies) with TSan.
FUZZ_SECONDS ?= 25
FUZZ_DIR  := $(BUILD)-fuzz
SAN_FLAGS := -DCMAKE_BUILD_TYPE=Debug -DXLATBENCH_WERROR=ON -DXLATBENCH_TESTS=ON
# gcc warns about libstdc++ internals under sanitizers (false positives); the plain build keeps -Werror.
SAN_NOWARN := -Wno-maybe-uninitialized
SAN_TARGETS := xlatperf xlatperf_tests xlatperf_stall_shim xdp_probe xdp_pass_object vlan_tag_objects
FUZZ_SRCS := dnsperf/tests/fuzz/fuzz_reply.cpp dnsperf/src/reply.cpp dnsperf/src/query.cpp dnsperf/src/ring.cpp

$(FUZZ_DIR)/fuzz_reply: $(FUZZ_SRCS) $(wildcard dnsperf/src/*.hpp) | $(STAMP)
	mkdir -p $(FUZZ_DIR)
	clang++-14 -std=c++17 -O1 -g -Wall -Werror -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	  -Idnsperf/src $(FUZZ_SRCS) -lldns -o $@

FUZZ_FRAME_SRCS := dnsperf/tests/fuzz/fuzz_frame.cpp dnsperf/src/xdp/frame.cpp dnsperf/src/xdp/flows.cpp \
  dnsperf/src/xdp/filter_keys.cpp dnsperf/src/xdp/encap.cpp \
  dnsperf/src/reply.cpp dnsperf/src/query.cpp dnsperf/src/ring.cpp

$(FUZZ_DIR)/fuzz_frame: $(FUZZ_FRAME_SRCS) $(wildcard dnsperf/src/*.hpp dnsperf/src/xdp/*.hpp) | $(STAMP)
	mkdir -p $(FUZZ_DIR)
	clang++-14 -std=c++17 -O1 -g -Wall -Werror -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	  -Idnsperf/src $(FUZZ_FRAME_SRCS) -lldns -o $@

# The AF_XDP frame parser, the flows' matching state behind it and the kernel filter's prefix keys (it must
# take exactly the frames to a flow), seeded with knotd replies in frames.
fuzz-frame: $(FUZZ_DIR)/fuzz_frame
	rm -rf $(FUZZ_DIR)/frame_corpus && cp -r dnsperf/tests/fuzz/frame_corpus $(FUZZ_DIR)/frame_corpus
	$(FUZZ_DIR)/fuzz_frame -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 $(FUZZ_DIR)/frame_corpus \
	  2>$(FUZZ_DIR)/fuzz_frame.log || { tail -40 $(FUZZ_DIR)/fuzz_frame.log; exit 1; }
	@grep -E '^stat::number_of_executed_units' $(FUZZ_DIR)/fuzz_frame.log | \
	  awk '{print "fuzz_frame: " $$2 " executions in $(FUZZ_SECONDS) s, no crash"}'

fuzz-reply: $(FUZZ_DIR)/fuzz_reply
	rm -rf $(FUZZ_DIR)/corpus && cp -r dnsperf/tests/fuzz/corpus $(FUZZ_DIR)/corpus
	$(FUZZ_DIR)/fuzz_reply -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 $(FUZZ_DIR)/corpus \
	  2>$(FUZZ_DIR)/fuzz.log || { tail -40 $(FUZZ_DIR)/fuzz.log; exit 1; }
	@grep -E '^stat::number_of_executed_units' $(FUZZ_DIR)/fuzz.log | \
	  awk '{print "fuzz_reply: " $$2 " executions in $(FUZZ_SECONDS) s, no crash"}'

test-hardening: fuzz-reply fuzz-frame
	cmake -S . -B $(BUILD)-asan -G Ninja $(SAN_FLAGS) \
	  -DCMAKE_CXX_FLAGS="-O1 -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer $(SAN_NOWARN)"
	cmake --build $(BUILD)-asan --target $(SAN_TARGETS)
	$(BUILD)-asan/dnsperf/xlatperf_tests
	ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=1 XLATBENCH_BUILD=$(abspath $(BUILD)-asan) \
	  $(VENV)/bin/pytest -q -m "not slow" tests/tester
	cmake -S . -B $(BUILD)-tsan -G Ninja $(SAN_FLAGS) -DCMAKE_CXX_FLAGS="-O1 -fsanitize=thread -Wno-tsan $(SAN_NOWARN)"
	cmake --build $(BUILD)-tsan --target xlatperf xlatperf_tests
	TSAN_OPTIONS=halt_on_error=1 $(BUILD)-tsan/dnsperf/xlatperf_tests -# "[#test_ring],[#test_xdp_queues]"
	TSAN_OPTIONS=halt_on_error=1:exitcode=66 XLATBENCH_BUILD=$(abspath $(BUILD)-tsan) \
	  $(VENV)/bin/pytest -q tests/tester/test_xlatperf_peer.py tests/tester/test_xlatperf_xdp_queues.py

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	shellcheck tools/install-deps tools/build-tayga tools/demo tools/test .ci/run $(wildcard tools/*.sh)

# HARDENING=0 leaves the fuzz and sanitizer runs out (they rebuild the tester twice).
HARDENING ?= 1
test: lint test-cpp test-py $(if $(filter 1,$(HARDENING)),test-hardening)

demo: build-demo
	XLATBENCH_BUILD=$(abspath $(BUILD)) $(VENV)/bin/xlatbench demo $(DEMO_ARGS)

clean:
	rm -rf $(BUILD)
