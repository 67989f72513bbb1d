# chring: the README's commands.  The build itself is meson + ninja; this file only drives it.
#
#   make deps     install the missing Debian packages (scripts/deps.sh): every group, or only
#                 DEPS_GROUPS (e.g. make deps DEPS_GROUPS=build); the one target besides test,
#                 demo and bench that installs anything
#   make build    build the library and tools (the tests are configured off unless
#                 -Dtests=true); installs no package: run make deps first on a new machine
#   make test     install every missing package, build (release) with the tests, run every
#                 test suite, end with "N passed, N failed"
#   make demo     install the build and bench packages, build, run the demo (bench/demo/chring-demo)
#   make bench    install the build and bench packages, build, run the benchmark harness
#                 (meson test --benchmark)
#   make llm-demo install the build and lb packages, build, run bench/llm/demo.py: four
#                 simulated LLM engines behind chring-lb --key prompt (docs/llm.md)
#   make fuzz     run fuzz/run.sh
#   make install  build, then meson install into PREFIX (default /usr/local, set on every
#                 install: a build directory keeps no earlier prefix) under DESTDIR (relative
#                 to the directory make runs in); installs no package, needs only the build ones
#   make format   clang-format -i over the C sources
#   make clean    remove the build directory
#
# Variables: BUILD (build directory, default build), BUILDTYPE (default release), MESON_ARGS
# (extra meson options, e.g. MESON_ARGS=-Durcu_lgpl=false), TEST_ARGS (extra `meson test`
# arguments, e.g. TEST_ARGS="--suite unit"), PREFIX, DESTDIR (docs/install.md), DEPS_GROUPS
# (make deps: build, test, bench, lb; default all).  How to add a target, a test or a CI
# step: CONTRIBUTING.md.

BUILD ?= build
BUILDTYPE ?= release
MESON_ARGS ?=
TEST_ARGS ?=
PREFIX ?= /usr/local
DESTDIR ?=
DEMO_ARGS ?=
DEPS_GROUPS ?=
FORMAT_DIRS = include src tools bench tests lb nginx vmod fuzz

export BUILDTYPE TEST_ARGS

.PHONY: all deps build build-bench test demo llm-demo bench fuzz install format clean

all: build

deps:
	@scripts/deps.sh $(if $(DEPS_GROUPS),--group $(DEPS_GROUPS))

# The library and the tools need only the build group (make deps DEPS_GROUPS=build); the tests
# (Criterion) are off unless MESON_ARGS turns them on.  A build directory that `make test`
# configured keeps its tests.  Installs nothing: meson names a missing package if there is one.
build:
	@scripts/build.sh $(BUILD) $(if $(findstring -Dtests=,$(MESON_ARGS)),,$(if $(wildcard $(BUILD)/build.ninja),,-Dtests=false)) $(MESON_ARGS)

build-bench:
	@scripts/deps.sh --group build bench
	@scripts/build.sh $(BUILD) $(if $(findstring -Dtests=,$(MESON_ARGS)),,$(if $(wildcard $(BUILD)/build.ninja),,-Dtests=false)) $(MESON_ARGS)

# scripts/test.sh builds first and prints the final "N passed, N failed" line itself, also
# when the build fails; a failed package install counts as one failure too.
test:
	@scripts/deps.sh || { echo "make test: missing packages (see above)"; echo "0 passed, 1 failed"; exit 1; }
	@scripts/test.sh $(BUILD) -Dtests=true $(MESON_ARGS)

demo: build-bench
	@test -x $(BUILD)/bench/demo/chring-demo || \
		{ echo "make demo: $(BUILD)/bench/demo/chring-demo was not built (-Dbench=false)"; exit 1; }
	@$(BUILD)/bench/demo/chring-demo $(DEMO_ARGS)

# Four simulated engines (bench/llm/engine.py) and one chring-lb on 127.0.0.1, a few requests,
# which engine served each and its prefix-cache hits; stops what it started (docs/llm.md).
llm-demo:
	@scripts/deps.sh --group build lb
	@scripts/build.sh $(BUILD) $(if $(findstring -Dtests=,$(MESON_ARGS)),,$(if $(wildcard $(BUILD)/build.ninja),,-Dtests=false)) $(MESON_ARGS)
	@test -x $(BUILD)/lb/chring-lb || \
		{ echo "make llm-demo: $(BUILD)/lb/chring-lb was not built (libevent missing?)"; exit 1; }
	@python3 bench/llm/demo.py --lb $(BUILD)/lb/chring-lb

bench: build-bench
	meson test -C $(BUILD) --benchmark --verbose --logbase benchlog

fuzz:
	@bash fuzz/run.sh

# meson takes a relative --destdir (and a DESTDIR in its environment) relative to the build
# directory: pass it absolute, and keep make's DESTDIR out of meson's environment.
install: build
	@case "$(PREFIX)" in /*) ;; *) echo "make install: PREFIX must be an absolute path, not '$(PREFIX)'"; exit 1 ;; esac
	@meson configure $(BUILD) -Dprefix=$(PREFIX)
	env -u DESTDIR meson install -C $(BUILD) $(if $(DESTDIR),--destdir $(abspath $(DESTDIR)))

format:
	@clang-format -i $$(find $(FORMAT_DIRS) -name '*.[ch]' -o -name '*.cpp')

clean:
	rm -rf $(BUILD)
