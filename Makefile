# Thin wrapper over Meson so that `make`, `make test` and `make bench` work from a fresh clone.
BUILD ?= build
ASAN_BUILD ?= build-asan
RELEASE_BUILD ?= build-release
PYTHON ?= /usr/bin/python3

.PHONY: all test unit integration soak asan asan-build asan-unit release bench bench-seal bench-scale bench-ml clean install

all: $(BUILD)/build.ninja
	ninja -C $(BUILD)

$(BUILD)/build.ninja:
	meson setup $(BUILD) -Dpython=$(PYTHON)

$(ASAN_BUILD)/build.ninja:
	meson setup $(ASAN_BUILD) -Db_sanitize=address,undefined -Db_lundef=false -Dpython=$(PYTHON)

# The optimized build (-O3, NDEBUG) compiles with -Werror too: the compiler sees other paths
# there (a value it thinks may be used uninitialized once the asserts are gone). Neither it nor the
# fuzzers build the dashboard's web page (npm): the plain and ASan builds do.
$(RELEASE_BUILD)/build.ninja:
	meson setup $(RELEASE_BUILD) --buildtype=release -Ddashboard=disabled -Dpython=$(PYTHON)

release: $(RELEASE_BUILD)/build.ninja
	ninja -C $(RELEASE_BUILD)

# `make install PREFIX=/usr/local DESTDIR=`: the programs, libloom with its headers and
# loom.pc, the Python package, man pages, systemd units and example settings; mount.loom in
# /sbin, where mount(8) looks (MOUNT_HELPER_DIR to change it).
PREFIX ?= /usr/local
DESTDIR ?=
MOUNT_HELPER_DIR ?= /sbin
install: all
	meson configure $(BUILD) -Dprefix=$(PREFIX) -Dmount_helper_dir=$(MOUNT_HELPER_DIR) -Dpython=$(PYTHON)
	ninja -C $(BUILD)
	meson install -C $(BUILD) --no-rebuild $(if $(DESTDIR),--destdir $(abspath $(DESTDIR)))

# Every test: C unit tests, then pytest against real servers.
test: unit integration

# Two pytest workers, each taking whole files (their clusters and mounts are their own): the
# suite waits on daemons about half its time, so two run in little more than one's time on 2
# cores. Without python3-pytest-xdist, one.
PYTEST_JOBS ?= $(shell $(PYTHON) -c 'import xdist' 2>/dev/null && echo '-n 2 --dist loadfile')

# The C tests only (suite 'unit'): `meson test` alone would run pytest too (suite 'integration').
unit: all
	meson test -C $(BUILD) --suite unit --print-errorlogs

integration: all
	LOOM_BUILD=$(abspath $(BUILD)) $(PYTHON) -m pytest -q $(PYTEST_JOBS) --durations=40 --junitxml=$(abspath $(BUILD))/integration.xml -m "not soak" tests/integration

# Cases too long for the suite's time in CI (marked soak): the same checks at full size.
soak: all
	LOOM_BUILD=$(abspath $(BUILD)) $(PYTHON) -m pytest -q --durations=30 -m soak tests/integration

# The ASan+UBSan build alone (scripts/test.sh compiles it while the plain pass runs).
asan-build: $(ASAN_BUILD)/build.ninja
	ninja -C $(ASAN_BUILD)

# The unit tests under AddressSanitizer and UndefinedBehaviorSanitizer.
asan-unit: asan-build
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 meson test -C $(ASAN_BUILD) --suite unit --print-errorlogs

# The integration tests against sanitized servers (less the slowest cases, which exercise
# nothing the others do not, and the local-folder sides of the POSIX and coherence cases, which
# prove the tests, not Loom: both run in the plain pass), to keep CI well within its time. The
# Python package's cases (pylib) load libloom into Python, which a sanitized libloom cannot be
# loaded into: plain only. ASAN_SKIP: files whose C paths the others reach too (applications
# over the mount, the tools' output formats and CLI spellings, the dashboard in a browser, the
# man pages, the resource agent's shell, settings files): plain only.
ASAN_SKIP = apps test_dashboard.py test_man_pages.py test_formats.py test_dom_cli.py test_ocf_agent.py \
	test_cluster_cmd.py test_install.py test_server_config.py
asan: asan-unit
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 LOOM_BUILD=$(abspath $(ASAN_BUILD)) \
		LOOM_POSIX_SIDES=loom LOOM_COHERENCE_SIDES=mounts,procs $(PYTHON) -m pytest -q $(PYTEST_JOBS) --durations=40 --junitxml=$(abspath $(ASAN_BUILD))/integration.xml -m "not slow and not soak and not pylib" \
		$(foreach f,$(ASAN_SKIP),--ignore=tests/integration/$(f)) tests/integration

# The benchmark suite (docs/performance.md); e.g. `make bench BENCH_ARGS=--quick`. The datasets
# through loom.torch.DataLoader (keyed, and through the mount's door) are part of it, as the
# targets of docs/python.md are measured in the same run, and so is the redundancy workload
# (mirrored and erasure-coded layouts against plain ones), and so is what the servers' counters
# cost (bench/stats_cost.py: counting against --no-stats and -o nostats); `make bench-ml` adds checkpoints and model loading.
bench:
	scripts/deps.sh bench
	$(MAKE) all
	$(PYTHON) bench/run.py --build $(abspath $(BUILD)) $(BENCH_ARGS)
	$(PYTHON) bench/datasets.py --build $(abspath $(BUILD)) $(ML_ARGS)
	$(PYTHON) bench/redundancy.py --build $(abspath $(BUILD)) $(REDUNDANCY_ARGS)
	$(PYTHON) bench/stats_cost.py --build $(abspath $(BUILD)) $(STATS_ARGS)

# What authenticating and encrypting every frame costs the sequential write and read, through a
# mount and libloom (docs/performance.md); e.g. `make bench-seal SEAL_ARGS="--size 256M --runs 1"`.
bench-seal:
	scripts/deps.sh bench
	$(MAKE) all
	$(PYTHON) bench/seal_cost.py --build $(abspath $(BUILD)) $(SEAL_ARGS)

# Bandwidth against stripes and clients over a bed of shaped hosts (docs/performance.md);
# e.g. `make bench-scale SCALE_ARGS="--rate 50 --size 256"`.
bench-scale:
	scripts/deps.sh bench
	$(MAKE) all
	$(PYTHON) bench/scale.py --build $(abspath $(BUILD)) $(SCALE_ARGS)

# The ML engineer's benches (docs/performance.md, docs/python.md): the datasets through
# loom.torch.DataLoader, checkpoint stalls, a 2 GiB model file; each beside a local folder.
bench-ml:
	scripts/deps.sh bench
	$(MAKE) all
	$(PYTHON) bench/datasets.py --build $(abspath $(BUILD)) $(ML_ARGS)
	$(PYTHON) bench/checkpoint.py --build $(abspath $(BUILD))
	$(PYTHON) bench/model_load.py --build $(abspath $(BUILD))

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(RELEASE_BUILD)

# ---- fuzzing (tests/fuzz/README.md) ----
# libFuzzer targets for every decoder, built by clang in their own dir, every object with
# -fsanitize=fuzzer-no-link and ASan+UBSan. -Wno-unknown-warning-option: clang 14 does not know
# the top-level meson.build's -Wno-format-truncation, a GCC-only option.
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 8
FUZZ_JOBS ?= 2

.PHONY: fuzz fuzz-build

$(FUZZ_BUILD)/build.ninja:
	CC=clang meson setup $(FUZZ_BUILD) -Dfuzz=true -Ddashboard=disabled -Db_sanitize=address,undefined -Db_lundef=false \
		-Dc_args='-fsanitize=fuzzer-no-link -fno-sanitize-recover=all -Wno-unknown-warning-option'

# The fuzz targets alone (scripts/test.sh compiles them while the plain pass runs).
fuzz-build: $(FUZZ_BUILD)/build.ninja
	ninja -C $(FUZZ_BUILD) $$(grep -o 'fuzz_[a-z_]*:[0-9]' tests/fuzz/run.sh | sed 's|^\(.*\):.$$|tests/fuzz/\1|')

# Every target for FUZZ_SECONDS, FUZZ_JOBS at a time; fails on any crash, leak or broken property.
fuzz: $(FUZZ_BUILD)/build.ninja
	tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_JOBS)
