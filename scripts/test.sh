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
# The other builds (optimized, ASan+UBSan, the fuzz targets) compile while the plain pass runs:
# that pass waits on its daemons about half its time, and the compilers (at the lowest CPU and I/O
# priority) take what it leaves. Their output is printed only if one fails.
others_log=$(mktemp)
others_status=$(mktemp)
# In a session of its own, so that a failing plain pass can stop it, compilers and all.
setsid sh -c '
	t0=$(date +%s)
	if nice -n 19 ionice -c 3 make -s release && nice -n 19 ionice -c 3 make -s asan-build &&
	   nice -n 19 ionice -c 3 make -s fuzz-build; then
		echo 0 >"$1"
	else
		echo 1 >"$1"
	fi
	echo "test.sh: the optimized, ASan and fuzz builds took $(( $(date +%s) - t0 )) s (beside the plain pass)"
' sh "$others_status" >"$others_log" 2>&1 &
others=$!
trap 'kill -- -$others 2>/dev/null || true; rm -f "$others_log" "$others_status"' EXIT
step make -s test
wait $others || true
if [ "$(cat "$others_status")" != 0 ]; then
	cat "$others_log"
	echo "test.sh: a build beside the plain pass failed" >&2
	exit 1
fi
tail -n 1 "$others_log"
step make -s asan
step make -s fuzz
# The Debian packages: built, checked with lintian, installed, run and purged.
step scripts/package-test.sh
echo "all tests passed in $(( $(date +%s) - began )) s"
