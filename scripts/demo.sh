#!/bin/sh
# Builds Loom, starts a local file system (one MDS and four OSS on 127.0.0.1, state under
# ./demo-cluster), mounts it on /mnt/loom (or $LOOM_DEMO_MNT) and shows it at work the way the
# seeds use Lustre. The file system stays up and mounted afterwards; stop it with
#   build/src/tools/loom cluster down --dir demo-cluster
set -eu
cd "$(dirname "$0")/.."
scripts/deps.sh build
make -s
# Installed as an admin would (make install: /usr/local, and /sbin/mount.loom for mount -t loom
# and fstab), so that `loom` and `mount -t loom` work from any shell afterwards.
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
$SUDO make -s install PREFIX=/usr/local >/dev/null
$SUDO ldconfig
LOOM=$PWD/build/src/tools/loom
DIR=${LOOM_DEMO_DIR:-$PWD/demo-cluster}
MNT=${LOOM_DEMO_MNT:-/mnt/loom}

$LOOM cluster up --dir "$DIR" --osts 4 --mount "$MNT"
export LOOM_KEY_FILE="$DIR/fs.key" # the tool proves it holds the file system's key
step() { printf '\n$ %s\n' "$*"; "$@"; }

step mount -t fuse.loom
step df -h "$MNT"
step $LOOM df -h "$MNT"
step mkdir -p "$MNT/models" "$MNT/data/tokenized" "$MNT/output"
# As the seeds advise: a large shared model file over every OST, small examples on one.
step $LOOM setstripe -c -1 "$MNT/models"
step $LOOM setstripe -c 1 "$MNT/data"
step $LOOM getstripe -d "$MNT/models"

printf '\n$ head -c 256M /dev/urandom > %s/models/model.safetensors\n' "$MNT"
head -c $((256 << 20)) /dev/urandom > "$MNT/models/model.safetensors"
step $LOOM getstripe "$MNT/models/model.safetensors"
step ls -l "$MNT/models"

printf '\n$ python3: 200 tokenized examples with np.save, read back in shuffled order with np.load\n'
/usr/bin/python3 - "$MNT/data/tokenized" <<'PY'
import os, random, sys, time
import numpy as np
root = sys.argv[1]
rng = np.random.default_rng(1)
arrays = {}
for i in range(200):
    a = rng.integers(0, 50000, size=int(rng.integers(512, 4097)), dtype=np.int32)
    np.save(os.path.join(root, "example_%d.npy" % i), a)
    arrays[i] = a
order = list(arrays)
random.shuffle(order)
t = time.monotonic()
for i in order:
    assert (np.load(os.path.join(root, "example_%d.npy" % i)) == arrays[i]).all()
print("  200 examples written and read back identical (%.0f files/s)" % (200 / (time.monotonic() - t)))
PY
step $LOOM getstripe -c "$MNT/data/tokenized/example_0.npy"

printf '\n$ python3: the same examples through libloom (the package loom, no mount), then read ahead in that order\n'
PYTHONPATH=$PWD/python /usr/bin/python3 - "$MNT" <<'PY'
import io, random, sys, time
import numpy as np
import loom
fs = loom.connect(sys.argv[1])              # the MDS, found from the mount
names = ["/data/tokenized/example_%d.npy" % i for i in range(200)]
order = list(range(200))
random.shuffle(order)
t = time.monotonic()
for i in order:
    with fs.open(names[i], "rb") as f:
        np.load(f)
native = 200 / (time.monotonic() - t)
t = time.monotonic()
with fs.prefetch([names[i] for i in order]) as pf:  # what loom.torch's datasets do per epoch
    for k in range(len(order)):
        np.load(io.BytesIO(pf.take(k)))
ahead = 200 / (time.monotonic() - t)
print("  through libloom: %.0f files/s; read ahead in the shuffled order: %.0f files/s" % (native, ahead))
print("  the model's OSTs, from Python:", fs.getstripe("/models/model.safetensors").osts())
fs.close()
PY
printf '\nLoom is mounted on %s. Try: ls %s; %s getstripe FILE; %s df -h.\nStop it with: %s cluster down --dir %s\n' \
	"$MNT" "$MNT" "$LOOM" "$LOOM" "$LOOM" "$DIR"
