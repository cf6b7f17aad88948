#!/bin/sh
# Runs Loom's whole test suite: C unit tests and pytest integration tests against real servers,
# first on a normal build, then both again on an ASan+UBSan build. Starts everything it
# uses and stops it again.
set -eu
cd "$(dirname "$0")/.."
scripts/deps.sh test
make -s
make -s test
make -s asan
make -s fuzz
echo "all tests passed"
