#!/bin/sh
# Installs the Debian 12 packages Loom needs to build and test, if any is missing.
# Usage: scripts/deps.sh [build|test|package|bench]   (test adds what the test suite needs,
# package what scripts/package-test.sh needs, bench what bench/run.py needs)
set -eu

# nodejs and npm: the web page of `loom dashboard`, bundled at build time (web/meson.build).
want="gcc make meson ninja-build pkg-config liblmdb-dev libisal-dev libfuse3-dev fuse3 libssl-dev libcurl4-openssl-dev libjson-c-dev libmicrohttpd-dev python3 python3-numpy nodejs npm"
if [ "${1:-build}" = test ]; then
	# The integration tests run unmodified applications on the mount, and speak the wire themselves
	# (loomwire.py: HKDF and AES-GCM from python3-cryptography); the multi-host bed needs
	# ip and tc (iproute2) and nsenter (util-linux); test_man_pages.py renders the manual pages
	# with groff (groff-base); test_python_package.py installs the package with pip in a venv
	# (python3-venv, -pip, -setuptools, -wheel, no network) and reads loom:// through fsspec and pandas;
	# test_ocf_agent.py runs the Pacemaker resource agent with resource-agents' ocf-tester, which
	# checks its meta-data with xmllint (libxml2-utils, only recommended by resource-agents);
	# the unit test test_etcd runs a private etcd (etcd-server's /usr/bin/etcd; etcdctl, from
	# etcd-client, to look into it by hand), on free ports of its own, not the packaged service's 2379;
	# test_dashboard.py loads `loom dashboard`'s page in headless Chromium (chromium).
	want="$want chromium etcd-server etcd-client python3-prometheus-client python3-yaml python3-pytest python3-pytest-xdist python3-cryptography python3-torch python3-venv python3-pip python3-setuptools python3-wheel python3-fsspec python3-pandas rsync git sqlite3 attr clang libclang-rt-14-dev iproute2 util-linux systemd groff-base resource-agents libxml2-utils"
elif [ "${1:-build}" = package ]; then
	# scripts/package-test.sh: dpkg-buildpackage with debhelper, lintian, and what the
	# packages depend on (systemd.pc for the unit directory).
	want="$want dpkg-dev debhelper dh-python fakeroot lintian systemd python3-numpy"
elif [ "${1:-build}" = bench ]; then
	# bench/run.py's peer side for the metadata workloads: a private MooseFS (bench/moosefs.py)
	# from Debian's packages, with its own ports and directories (none of the packages' services).
	# make bench-ml (bench/datasets.py, checkpoint.py, model_load.py) needs PyTorch.
	want="$want fio python3-matplotlib python3-torch iproute2 util-linux moosefs-master moosefs-chunkserver moosefs-client"
fi

missing=""
for p in $want; do
	# NodeSource's nodejs brings npm itself (and conflicts with Debian's npm package).
	[ "$p" = npm ] && command -v npm >/dev/null 2>&1 && continue
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0

echo "Installing missing Debian packages:$missing"
if [ "$(id -u)" -eq 0 ]; then
	SUDO=""
elif command -v sudo >/dev/null 2>&1; then
	SUDO="sudo"
else
	echo "error: need root (or sudo) to install:$missing" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing
