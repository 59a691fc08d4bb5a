#!/usr/bin/env bash
# First steps: build zarrfs, write a small demo hierarchy with zarrfs's own encoder
# (v3 with zstd and sharding, a v2 array, an implicit group), mount it, and show what
# to try. Usage: bash scripts/demo.sh [WORKDIR]   (default /tmp/zarrfs-demo)
# ZARRFS_BIN may name an already built binary.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
work="${1:-/tmp/zarrfs-demo}"

# What the demo and its suggestions use: fusermount3 (fuse3), getfattr (attr), hexdump
# (bsdextrautils).
missing=()
command -v fusermount3 >/dev/null || missing+=(fuse3)
command -v getfattr >/dev/null || missing+=(attr)
command -v hexdump >/dev/null || missing+=(bsdextrautils)
if [ ${#missing[@]} -gt 0 ]; then
    echo "demo: installing ${missing[*]} (needs root)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi
if [ -z "${ZARRFS_BIN:-}" ]; then
    cargo build --release --quiet
    ZARRFS_BIN="$PWD/target/release/zarrfs"
fi

mnt="$work/mnt"
if grep -qs " $mnt " /proc/self/mountinfo; then
    "$ZARRFS_BIN" umount "$mnt"
fi
rm -rf "$work/demo.zarr"
mkdir -p "$mnt"
"$ZARRFS_BIN" demo "$work/demo.zarr"
"$ZARRFS_BIN" mount "$work/demo.zarr" "$mnt" --log-file "$work/zarrfs.log"

cat <<EOT
zarrfs: $work/demo.zarr is mounted at $mnt (log: $work/zarrfs.log)

Try:
  ls -la $mnt $mnt/surface $mnt/legacy
  cat $mnt/.temperature.json
  getfattr -d $mnt/temperature
  hexdump -C $mnt/temperature | head
  python3 -c 'import numpy; a = numpy.memmap("$mnt/temperature", "<f4", mode="r", shape=(24, 90, 180)); print(a[0, 45, :8], a.mean())'   # pip install numpy first
  $ZARRFS_BIN inspect $work/demo.zarr
  $ZARRFS_BIN cat $work/demo.zarr temperature > /tmp/temperature.f32   # a progress bar on a terminal
  $ZARRFS_BIN umount $mnt
  mount -t fuse.zarrfs $work/demo.zarr $mnt -o order=F,cache_size=64MiB   # as root, zarrfs on PATH
EOT
