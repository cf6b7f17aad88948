#!/bin/sh
# Builds Loom, starts a local file system (one MDS and four OSS on 127.0.0.1) under
# ./demo-cluster, and shows it at work. The file system keeps running afterwards; stop it with
#   build/src/tools/loom cluster down --dir demo-cluster
set -eu
cd "$(dirname "$0")/.."
scripts/deps.sh build
make -s
LOOM=build/src/tools/loom
DIR=${LOOM_DEMO_DIR:-$PWD/demo-cluster}

$LOOM cluster up --dir "$DIR" --osts 4
export LOOM_CONFIG="$DIR/loom.conf"
step() { printf '\n$ %s\n' "$*"; "$@"; }

step $LOOM df -h
step $LOOM mkdir -p /models /data
# As the seeds advise: a large shared model file over every OST, small examples on one.
step $LOOM setstripe -c -1 /models
step $LOOM setstripe -c 1 /data
step $LOOM getstripe -d /models

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
head -c $((64 << 20)) /dev/urandom > "$tmp/model.safetensors"
step $LOOM put "$tmp/model.safetensors" /models/model.safetensors
step $LOOM getstripe /models/model.safetensors
step $LOOM get /models/model.safetensors "$tmp/back"
printf '\n$ sha256sum (original, read back through Loom)\n'
sha256sum "$tmp/model.safetensors" "$tmp/back" | sed "s#$tmp/##"
cmp -s "$tmp/model.safetensors" "$tmp/back" && echo "identical: 64 MiB striped over every OST and read back"
step $LOOM ls -l /models
printf '\nThe file system is still running: export LOOM_CONFIG=%s and use %s, or stop it with\n  %s cluster down --dir %s\n' \
	"$LOOM_CONFIG" "$LOOM" "$LOOM" "$DIR"
