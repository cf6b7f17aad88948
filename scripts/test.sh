#!/bin/sh
# Runs Loom's whole test suite: C unit tests and pytest integration tests against real servers,
# first on a normal build (an optimized build must compile as well), then both again on an
# ASan+UBSan build, then the fuzzers and the Debian packages. Starts everything it uses and
# stops it again.
set -eu
cd "$(dirname "$0")/.."
began=$(date +%s)
# Each step, and how long it took (CI has a time budget: see where it goes).
step() {
	t0=$(date +%s)
	"$@"
	echo "test.sh: '$*' took $(( $(date +%s) - t0 )) s"
}
step scripts/deps.sh test
step make -s
step make -s release
step make -s test
step make -s asan
step make -s fuzz
# The Debian packages: built, checked with lintian, installed, run and purged.
step scripts/package-test.sh
echo "all tests passed in $(( $(date +%s) - began )) s"
