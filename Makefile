# Thin wrapper over Meson so that `make`, `make test` and `make bench` work from a fresh clone.
BUILD ?= build
MESON_OPTS ?=
PYTHON ?= /usr/bin/python3

.PHONY: all test unit integration bench clean asan

all: $(BUILD)/build.ninja
	ninja -C $(BUILD)

$(BUILD)/build.ninja:
	meson setup $(BUILD) $(MESON_OPTS)

unit: all
	meson test -C $(BUILD) --print-errorlogs

integration: all
	LOOM_BUILD=$(abspath $(BUILD)) $(PYTHON) -m pytest -q tests/integration

test: unit integration

asan:
	$(MAKE) BUILD=build-asan MESON_OPTS="-Db_sanitize=address,undefined -Db_lundef=false" test

clean:
	rm -rf $(BUILD) build-asan
