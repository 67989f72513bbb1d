# chring: the README's commands.  The build itself is meson + ninja; this file only drives it.
#
#   make test     install missing Debian packages, build (release), run every test suite,
#                 end with "N passed, N failed"
#   make demo     install, build, run the demo (bench/demo/chring-demo)
#   make bench    install, build, run the benchmark harness (meson test --benchmark)
#   make fuzz     run fuzz/run.sh
#   make install  meson install (PREFIX=/usr/local by default, DESTDIR honoured)
#   make format   clang-format -i over the C sources
#   make clean    remove the build directory
#
# Variables: BUILD (build directory, default build), BUILDTYPE (default release), MESON_ARGS
# (extra meson options, e.g. MESON_ARGS=-Durcu_lgpl=false), TEST_ARGS (extra `meson test`
# arguments, e.g. TEST_ARGS="--suite unit"), PREFIX, DESTDIR.

BUILD ?= build
BUILDTYPE ?= release
MESON_ARGS ?=
TEST_ARGS ?=
PREFIX ?=
DEMO_ARGS ?=
FORMAT_DIRS = include src tools bench tests examples fuzz

export BUILDTYPE TEST_ARGS

.PHONY: all deps build test demo bench fuzz install format clean

all: build

deps:
	@scripts/deps.sh

build: deps
	@scripts/build.sh $(BUILD) $(MESON_ARGS)

# scripts/test.sh builds first and prints the final "N passed, N failed" line itself, also
# when the build fails; a failed package install counts as one failure too.
test:
	@scripts/deps.sh || { echo "make test: missing packages (see above)"; echo "0 passed, 1 failed"; exit 1; }
	@scripts/test.sh $(BUILD) $(MESON_ARGS)

demo: build
	@test -x $(BUILD)/bench/demo/chring-demo || \
		{ echo "make demo: $(BUILD)/bench/demo/chring-demo was not built (-Dbench=false)"; exit 1; }
	@$(BUILD)/bench/demo/chring-demo $(DEMO_ARGS)

bench: build
	meson test -C $(BUILD) --benchmark --verbose --logbase benchlog

fuzz:
	@bash fuzz/run.sh

install: build
	@if [ -n "$(PREFIX)" ]; then meson configure $(BUILD) -Dprefix=$(PREFIX); fi
	meson install -C $(BUILD) $(if $(DESTDIR),--destdir $(DESTDIR))

format:
	@clang-format -i $$(find $(FORMAT_DIRS) -name '*.[ch]' -o -name '*.cpp')

clean:
	rm -rf $(BUILD)
