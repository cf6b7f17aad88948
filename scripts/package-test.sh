#!/bin/sh
# Builds Loom's Debian packages from this tree with the standard tools (dpkg-buildpackage,
# debhelper), checks them with lintian (no errors), installs them on this machine, checks what
# an admin would run first, and removes them again. scripts/test.sh runs it after the suite.
# Usage: scripts/package-test.sh [--keep DIR]   (--keep: leave the .debs in DIR)
set -eu
cd "$(dirname "$0")/.."
scripts/deps.sh package
keep=""
[ "${1:-}" = --keep ] && keep="$2"

work=$(mktemp -d /tmp/loom-deb-XXXXXX)
pkgs="loom-server loom-client libloom-dev python3-loom"
ours=""
cleanup() {
	[ -n "$ours" ] && dpkg --purge $ours >/dev/null
	rm -rf "$work"
}
trap cleanup EXIT INT TERM
for p in $pkgs; do
	if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
		echo "package-test: $p is installed already; not touching this machine's copy" >&2
		exit 1
	fi
done

# The source as it is here (committed or not), without build trees.
mkdir "$work/loom-0.1.0"
tar --exclude='./build*' --exclude=./.git --exclude='./demo-cluster' --exclude='*.pyc' -cf - . |
	tar -xf - -C "$work/loom-0.1.0"
echo "package-test: dpkg-buildpackage in $work"
(cd "$work/loom-0.1.0" && dpkg-buildpackage -us -uc -b -j"$(nproc)" >"$work/build.log" 2>&1) || {
	tail -60 "$work/build.log" >&2
	echo "package-test: dpkg-buildpackage failed (log above)" >&2
	exit 1
}
ls "$work"/*.deb
echo "package-test: lintian"
lintian --fail-on error --tag-display-limit 0 "$work"/*.changes

echo "package-test: installing"
export DEBIAN_FRONTEND=noninteractive
ours="$pkgs"
apt-get install -y -qq --no-install-recommends "$work"/loom-server_*.deb "$work"/loom-client_*.deb \
	"$work"/libloom-dev_*.deb "$work"/python3-loom_*.deb >/dev/null
# What the packages put where an admin looks, and that it runs from there.
/usr/sbin/loom-mds --version
/usr/sbin/loom-oss --version
/usr/bin/loom --version
/sbin/mount.loom --version
env -i /sbin/mount.loom --help | grep -q "/usr/bin/loom-mount"
pkg-config --exists loom
[ -d /etc/loom ]
# Pacemaker's resource agent ocf:loom:loom (docs/pacemaker.md), where Pacemaker looks for agents.
[ -x /usr/lib/ocf/resource.d/loom/loom ]
/usr/bin/python3 -c 'import loom, sys; assert loom.__file__.startswith("/usr/lib/python3/dist-packages/loom/"), loom.__file__'
# fsspec finds loom:// by the entry point the package records (loom-VERSION.dist-info).
/usr/bin/python3 -c 'from importlib.metadata import entry_points; assert [e.value for e in entry_points(group="fsspec.specs") if e.name == "loom"] == ["loom.fsspec:LoomFileSystem"]'
if command -v systemd-analyze >/dev/null 2>&1; then
	systemd-analyze verify --man=yes /lib/systemd/system/loom-mds.service /lib/systemd/system/loom-oss@.service
fi
# A file system from the installed programs alone: format, serve, and ask it.
d="$work/fs"
mkdir -p "$d"
loom-mds --format --fsname pkgfs --mdt "$d/mdt" >/dev/null
loom-oss --format --fsname pkgfs --ost "$d/ost0" >/dev/null
loom-mds --mdt "$d/mdt" --listen 127.0.0.1:0 --port-file "$d/mds.addr" 2>"$d/mds.log" &
mds=$!
i=0
while [ ! -s "$d/mds.addr" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
loom-oss --ost "$d/ost0" --mds "$(cat "$d/mds.addr")" --listen 127.0.0.1:0 --key "$d/mdt/fs.key" 2>"$d/oss.log" &
oss=$!
i=0
until loom --fs "$(cat "$d/mds.addr")" --key "$d/mdt/fs.key" df 2>/dev/null | grep -q "pkgfs-OST0000_UUID"; do
	i=$((i + 1))
	[ $i -lt 100 ] || { cat "$d"/*.log >&2; echo "package-test: the installed servers do not serve" >&2; exit 1; }
	sleep 0.2
done
kill "$oss" "$mds"
wait "$oss" "$mds" || true
[ -n "$keep" ] && cp "$work"/*.deb "$keep"/
dpkg --purge $ours >/dev/null
ours=""
for p in $pkgs; do
	if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
		echo "package-test: $p is still installed after dpkg --purge" >&2
		exit 1
	fi
done
[ ! -e /usr/sbin/loom-mds ] && [ ! -e /sbin/mount.loom ] || { echo "package-test: files left after purge" >&2; exit 1; }
echo "package-test: the packages build, pass lintian, install, run and purge"
