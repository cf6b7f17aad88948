#!/bin/sh
# Builds the fuzz targets and runs each for SECONDS on a copy of its seed corpus, JOBS at a time.
# Fails on any crash, leak, timeout or broken property; what made a target fail is kept as
# BUILD/fuzz-artifacts/TARGET-crash-* (replay it: BUILD/tests/fuzz/TARGET FILE).
#   tests/fuzz/run.sh BUILD [SECONDS] [JOBS]
set -eu
build=$1
secs=${2:-20}
jobs=${3:-2}
here=$(cd "$(dirname "$0")" && pwd)

# target:max_len. The frame streams need room for several frames; a layout for 2000 stripes.
targets="fuzz_server_frames:16384 fuzz_rpc_replies:16384 fuzz_mdc_replies:8192 fuzz_mds_req:8192
	fuzz_layout:33000 fuzz_readdir:8192 fuzz_hdr:4096 fuzz_ost_req:256 fuzz_ost_format:8192"
names=$(for t in $targets; do echo "tests/fuzz/${t%%:*}"; done)
# shellcheck disable=SC2086
if ! ninja -C "$build" $names >"$build/fuzz-build.log" 2>&1; then
	cat "$build/fuzz-build.log"
	exit 1
fi
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$build/fuzz-artifacts"

# One lane per job; each runs its share of the targets one after the other.
lane=0
for t in $targets; do
	echo "$t" >>"$work/lane$lane"
	lane=$(((lane + 1) % jobs))
done
for l in "$work"/lane*; do
	(
		while IFS=: read -r name maxlen; do
			mkdir -p "$work/$name"
			cp "$here/corpus/$name"/* "$work/$name"/
			if "$build/tests/fuzz/$name" -max_total_time="$secs" -max_len="$maxlen" -timeout=20 \
				-rss_limit_mb=2048 -artifact_prefix="$build/fuzz-artifacts/$name-" \
				"$work/$name" >"$work/$name.log" 2>&1; then
				echo "fuzz: $name: $(grep -o 'Done [0-9]* runs' "$work/$name.log" | tail -1) in ${secs}s, no failure"
			else
				echo "fuzz: $name FAILED:"
				grep -E 'property broken|ERROR|runtime error|SUMMARY|Test unit written' "$work/$name.log" | head -20
				touch "$work/failed"
			fi
		done <"$l"
	) &
done
wait
if [ -e "$work/failed" ]; then
	echo "fuzz: FAILED (inputs kept in $build/fuzz-artifacts/)"
	exit 1
fi
echo "fuzz: every target ran ${secs}s without a failure"
