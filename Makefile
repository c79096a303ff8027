# The two commands: `make demo` and `make test`. Both install what is missing first
# (scripts/setup.sh), configure and build, then run.
#   make build     configure and build build/ (AddressSanitizer + UBSan, used by the tests)
#   make release   an optimised build in build-release/ (no sanitizers; benchmarks and demo)
#   make bench     build-release/ benchmarks, results as JSON lines
#   make fuzz      libFuzzer targets with clang in build-fuzz/
#   make fuzz-smoke  each libFuzzer target for FUZZ_SECONDS (30) from its corpus (clang; CI)
#   make install   the release build and its files under PREFIX (DESTDIR for staging)
#   make demo DEMO_ARGS=--json   passes options to `ferry demo` (docs/demo.md)
#   make test-loaded  `make test` while CPU burners keep every core busy (BURNERS, default
#                  one per core; scripts/test_loaded.sh)
#   make soak      the chaos soak, 10 min (SOAK_SECONDS, SOAK_SEED, SOAK_CATALOG=sqlite|zk);
#                  not part of `make test` (docs/reliability.md)
BUILD      ?= build
RELEASE    ?= build-release
GENERATOR  := $(shell command -v ninja >/dev/null 2>&1 && echo Ninja || echo "Unix Makefiles")
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CTEST_ARGS ?=
DEMO_ARGS  ?=
SOAK_SECONDS ?= 600
SOAK_SEED    ?=
SOAK_CATALOG ?= sqlite

PREFIX     ?= /usr/local

.PHONY: all deps deps-build build release test test-loaded soak demo bench fuzz fuzz-smoke clean install

all: build

deps:
	@bash scripts/setup.sh

deps-build:
	@bash scripts/setup.sh --build

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -G "$(GENERATOR)" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFERRY_SANITIZE=ON

build: deps-build $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

release: deps-build
	cmake -S . -B $(RELEASE) -G "$(GENERATOR)" -DCMAKE_BUILD_TYPE=Release -DFERRY_SANITIZE=OFF -DBUILD_TESTING=OFF
	cmake --build $(RELEASE) -j $(JOBS)

# the soak's short ctest (label soak) is left out; `make soak` runs the long one
test: deps build
	cd $(BUILD) && ctest --no-tests=error --output-on-failure -j $(JOBS) -LE soak $(CTEST_ARGS)

# the same under load: busy loops on every core beside the tests, stopped by PID at the end
test-loaded:
	@bash scripts/test_loaded.sh JOBS=$(JOBS) $(if $(CTEST_ARGS),CTEST_ARGS="$(CTEST_ARGS)")

# the chaos soak on the sanitizer build: faults, then invariants; report in $(BUILD)/soak-report.json
soak: deps build
	cd $(BUILD) && SOAK_SECONDS=$(SOAK_SECONDS) SOAK_SEED=$(SOAK_SEED) SOAK_CATALOG=$(SOAK_CATALOG) \
	  FERRY_BIN=$$PWD/ferry FERRY_BUILD_DIR=$$PWD FERRY_SOURCE_DIR=$(CURDIR) bash $(CURDIR)/tests/soak/soak.sh

# the release build: the demo measures ferry, not the sanitizers (`make build` is for the tests)
demo: deps release
	./$(RELEASE)/ferry demo $(DEMO_ARGS)

bench: deps release
	bash bench/run.sh $(RELEASE)

# make install [PREFIX=/usr] [DESTDIR=/tmp/stage]: the release build, ferry(1), systemd units,
# example configs and docs (docs/operations.md, "Installing")
install: release
	DESTDIR=$(DESTDIR) cmake --install $(RELEASE) --prefix $(PREFIX)

fuzz: deps-build
	CC=clang cmake -S . -B build-fuzz -G "$(GENERATOR)" -DFERRY_FUZZ=ON -DBUILD_TESTING=OFF
	cmake --build build-fuzz -j $(JOBS)

# each target for FUZZ_SECONDS from its corpus (fuzz/corpus/<name>; new inputs go to a scratch
# copy, the corpus in git is not touched); stops at the first crash. `make test` replays the
# corpora without clang (fuzz_smoke.* tests).
FUZZ_SECONDS ?= 30
fuzz-smoke: fuzz
	@set -e; for f in build-fuzz/fuzz/fuzz_*; do \
	  n=$$(basename $$f); c=fuzz/corpus/$${n#fuzz_}; w=build-fuzz/corpus/$${n#fuzz_}; \
	  mkdir -p $$w; [ -d $$c ] && cp -n $$c/* $$w/ 2>/dev/null || true; \
	  echo "== $$n ($(FUZZ_SECONDS) s)"; \
	  $$f -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 $$w > $$w.log 2>&1 || \
	    { tail -40 $$w.log; echo "$$n failed (log: $$w.log)"; exit 1; }; \
	  grep -E "stat::number_of_executed_units|Done" $$w.log | tail -2; \
	done

clean:
	rm -rf $(BUILD) $(RELEASE) build-fuzz
