#!/usr/bin/env bash
# Rebuilds the seed inputs of the whole-check fuzz target (corpus/check/):
# small images of every configuration the fixtures cover, made with
# `mke2fs -d` from a small tree like fixtures/make-tree.sh's, in the
# compact form of src/image.rs (only blocks that are not zeros). Run as
# root, it also adds images whose journal holds committed transactions
# (mounted, written, synced and copied while still mounted), so replay is
# fuzzed too.
#
#   fuzz/make-seeds.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
out="$here/corpus/check"
export MKE2FS_CONFIG="$root/fixtures/mke2fs.conf" LC_ALL=C E2FSPROGS_FAKE_TIME=1700000000 E2FSCK_CONFIG=/dev/null
work=$(mktemp -d)
mnt="$work/mnt"
cleanup() {
  mountpoint -q "$mnt" 2>/dev/null && umount "$mnt"
  rm -rf "$work"
}
trap cleanup EXIT

# A small tree: every kind of inode, an indexed directory, a file with
# many extents (an extent tree of depth 1, indirect blocks at 1 KiB),
# sparse files, hard links and both kinds of symlink; file contents are
# a few bytes so that the seeds stay small.
tree="$work/tree"
mkdir -p "$tree"/{files,deep/a/b/c/d,wide,links,special,sparse,empty,names}
for n in 0 1 59 60 61 100; do head -c "$n" /dev/zero | tr '\0' 'x' > "$tree/files/size-$n"; done
for i in $(seq 0 19); do
  printf 'piece %d' "$i" | dd of="$tree/files/fragmented" bs=1024 seek=$((i * 24)) conv=notrunc status=none
done
truncate -s 4M "$tree/sparse/holes"
printf 'middle' | dd of="$tree/sparse/holes" bs=1024 seek=2000 conv=notrunc status=none
truncate -s 64M "$tree/sparse/empty-64m"
echo leaf > "$tree/deep/a/b/c/d/leaf"
for i in $(seq 1 150); do : > "$tree/wide/a-longer-entry-name-for-the-index-$i"; done
for i in 1 2 3; do mkdir -p "$tree/dirs/d$i/sub"; echo "$i" > "$tree/dirs/d$i/sub/f"; done
echo shared > "$tree/links/original"
ln "$tree/links/original" "$tree/links/second"
ln "$tree/links/original" "$tree/deep/a/third"
ln -s original "$tree/links/fast"
ln -s "$(printf 'long-target-%.0s' $(seq 1 12))" "$tree/links/slow"
mkfifo "$tree/special/fifo"
if [ "$(id -u)" = 0 ]; then
  mknod "$tree/special/char" c 1 3
  mknod "$tree/special/block" b 7 0
fi
printf 'y' > "$tree/names/$(printf 'caf\xc3\xa9')"
printf 'z' > "$tree/names/$(printf 'n%.0s' $(seq 1 255))"
if command -v setfattr >/dev/null && setfattr -n user.seed -v one "$tree/links/original" 2>/dev/null; then
  setfattr -n user.big -v "$(printf 'v%.0s' $(seq 1 300))" "$tree/files/size-1"
  setfattr -n user.dir -v yes "$tree/deep"
fi

encode() { # image block-size name
  python3 - "$1" "$2" "$3" <<'EOF'
import struct, sys
img, bs, dst = open(sys.argv[1], 'rb').read(), int(sys.argv[2]), sys.argv[3]
log = bs.bit_length() - 11
out = bytearray(b'E4FZ' + bytes([log, 0, 0, 0]) + struct.pack('<I', len(img) // bs))
zero = bytes(bs)
for n in range(len(img) // bs):
    b = img[n * bs:(n + 1) * bs]
    if b != zero:
        out += struct.pack('<I', n) + b
open(dst, 'wb').write(out)
EOF
}

mk() { # name "mke2fs args" size block-size
  local name=$1 args=$2 size=$3 bs=$4 img="$work/$1.img"
  # shellcheck disable=SC2086
  mke2fs -q -F -U 01234567-89ab-cdef-0123-456789abcdef -E hash_seed=fedcba98-7654-3210-fedc-ba9876543210 \
    -L "$name" $args -b "$bs" -d "$tree" "$img" "$size" >/dev/null
  if [[ "$args" == *quota* ]]; then
    e2fsck -fy "$img" >/dev/null 2>&1 || [ $? -eq 1 ]
  fi
  e2fsck -fn "$img" >/dev/null 2>&1 || { echo "$name: e2fsck does not find it clean" >&2; exit 1; }
  encode "$img" "$bs" "$out/$name"
}

rm -rf "$out"
mkdir -p "$out"
mk ext2 "-t ext2 -N 512" 2M 1024
mk ext2-4k "-t ext2 -O ^dir_index -N 512" 2M 4096
mk ext3 "-t ext3 -N 512 -J size=1" 3M 1024
mk ext4 "-t ext4 -O metadata_csum,64bit,flex_bg,extent,huge_file,dir_nlink,extra_isize -N 512" 3M 1024
mk ext4-4k "-t ext4 -N 512 -J size=4" 16M 4096
mk ext4-nocsum "-t ext4 -O ^metadata_csum,uninit_bg -N 512" 3M 1024
mk ext4-no64-noflex "-t ext4 -O ^64bit,^flex_bg -N 512 -g 1024" 3M 1024
mk ext4-inline "-t ext4 -O inline_data -I 256 -N 512" 3M 1024
mk ext4-bigalloc "-t ext4 -O bigalloc,extent -C 16384 -N 512" 12M 4096
mk ext4-quota "-t ext4 -O quota,project -I 256 -N 512" 3M 1024
mk ext4-casefold "-t ext4 -O casefold -N 512" 3M 1024
mk ext4-orphan-file "-t ext4 -O orphan_file -N 512" 3M 1024

# Journals with transactions to replay.
if [ "$(id -u)" = 0 ] && command -v mount >/dev/null; then
  mkdir -p "$mnt"
  live() { # name "mke2fs args" size block-size mount-options
    local name=$1 args=$2 size=$3 bs=$4 opts=$5 img="$work/$1.img"
    # shellcheck disable=SC2086
    mke2fs -q -F -U 01234567-89ab-cdef-0123-456789abcdef -E hash_seed=fedcba98-7654-3210-fedc-ba9876543210 \
      -L "$name" $args -b "$bs" -d "$tree" "$img" "$size" >/dev/null
    mount -o "loop,$opts" "$img" "$mnt" || return 0
    mkdir -p "$mnt/new/dir"
    for i in $(seq 1 30); do echo "$i" > "$mnt/new/file-$i"; done
    rm -f "$mnt/new/file-1"* "$mnt/files/size-0"
    mv "$mnt/links/second" "$mnt/new/dir/moved"
    sync
    echo more > "$mnt/new/dir/late"
    sync -f "$mnt/new/dir/late"
    cp "$img" "$work/$name-live.img"
    umount "$mnt"
    encode "$work/$name-live.img" "$bs" "$out/$name-journal"
  }
  live ext3 "-t ext3 -N 512 -J size=1" 3M 1024 "data=ordered,commit=600"
  live ext4 "-t ext4 -O metadata_csum -N 512" 3M 1024 "commit=600"
  live ext4-4k "-t ext4 -N 512 -J size=4" 16M 4096 "commit=600"
  if mke2fs -q -F -t ext4 -O fast_commit "$work/probe.img" 8M >/dev/null 2>&1; then
    live ext4-fast-commit "-t ext4 -O fast_commit -N 512" 4M 1024 "commit=600"
  fi
fi
ls -l "$out"
