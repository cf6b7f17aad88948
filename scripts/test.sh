#!/bin/sh
# Runs Loom's whole test suite: C unit tests and pytest integration tests against real servers,
# first on a normal build (an optimized build must compile as well), then both again on an
# ASan+UBSan build, then the fuzzers and the Debian packages. Starts everything it uses and
# stops it again.
set -eu
cd "$(dirname "$0")/.."
scripts/deps.sh test
make -s
make -s release
make -s test
make -s asan
make -s fuzz
# The Debian packages: built, checked with lintian, installed, run and purged.
scripts/package-test.sh
echo "all tests passed"
