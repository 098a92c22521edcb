#!/usr/bin/env bash
# Regenerates the seed corpora in corpus/<target>/ of the fuzz targets from
# images built the way fixtures/make-images.sh builds the test images, and
# from images whose journals hold committed transactions.
#
#   crates/ext4-layout/fuzz/make-seeds.sh
#
# Needs root (loop mounts), e2fsprogs (mke2fs, e2fsck, tune2fs, debugfs),
# python3 and taskset. Files in corpus/<target>/ named by a 40-digit hex
# SHA-1 (what libFuzzer writes) are kept; every other file there is
# replaced.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
fixtures=$repo/fixtures
py=$here/make-seeds.py
out=$here/corpus
export MKE2FS_CONFIG="$fixtures/mke2fs.conf" LC_ALL=C TZ=UTC E2FSPROGS_FAKE_TIME=1700000000 \
  E2FSCK_CONFIG=/dev/null E2FSCK_TIME=1700000000
umask 022

if [ "$(id -u)" != 0 ]; then
  echo "make-seeds.sh: needs root for loop mounts" >&2
  exit 1
fi
for tool in mke2fs e2fsck tune2fs debugfs python3 taskset; do
  command -v "$tool" >/dev/null || { echo "make-seeds.sh: $tool not found" >&2; exit 1; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/ext4-seeds.XXXXXX")
cleanup() {
  local m
  awk -v w="$work/" 'index($2, w) == 1 {print $2}' /proc/self/mounts | sort -r |
    while read -r m; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

uuid=01234567-89ab-cdef-0123-456789abcdef
hash_seed=fedcba98-7654-3210-fedc-ba9876543210
img=$work/img
mnt=$work/mnt
mkdir -p "$img" "$mnt"

# The fixture tree lives in a loop-mounted ext4 file system made with a
# fixed UUID and hash seed, so that it has user xattrs and lists its
# directories in the same order on every host. Its inodes get fixed
# times before mke2fs -d copies them.
tree_img=$work/tree.img
mke2fs -q -F -t ext4 -b 4096 -U 76543210-fedc-ba98-7654-3210fedcba98 \
  -E hash_seed="$hash_seed" -L tree "$tree_img" 256M >/dev/null
mount -o loop,noatime "$tree_img" "$mnt"
WIDE=300 "$fixtures/make-tree.sh" "$mnt/tree"
python3 "$py" tree-extras "$mnt/tree"
python3 "$py" tree-times "$mnt/tree" >"$work/times.cmd"
umount "$mnt"
debugfs -w -f "$work/times.cmd" "$tree_img" >/dev/null 2>&1
mount -o loop,ro,noatime "$tree_img" "$mnt"
tree=$mnt/tree

# name|mke2fs arguments|size: the configurations of make-images.sh, one
# with 128-byte inodes and one with a fast commit area.
configs=(
  "ext2|-t ext2 -b 4096|48M"
  "ext3|-t ext3 -b 4096|48M"
  "ext4|-t ext4 -O metadata_csum,64bit,flex_bg,extent,huge_file,dir_nlink,extra_isize -b 4096|64M"
  "ext4-nocsum|-t ext4 -O ^metadata_csum,uninit_bg -b 4096|64M"
  "ext4-no64-noflex|-t ext4 -O ^64bit,^flex_bg -b 4096|64M"
  "ext4-inline|-t ext4 -O inline_data -I 256 -b 4096|64M"
  "ext4-1k|-t ext4 -b 1024|64M"
  "ext2-1k|-t ext2 -b 1024 -O ^dir_index|32M"
  "ext4-bigalloc|-t ext4 -O bigalloc,extent -C 16384 -b 4096|128M"
  "ext4-quota|-t ext4 -O quota,project -I 256 -b 4096|64M"
  "ext2-128|-t ext2 -b 1024 -I 128|32M"
  "ext4-fc|-t ext4 -O fast_commit -b 4096|64M"
)

fsck_fix() { # IMG [e2fsck options]: repairs or optimises; exit 1 is fine
  local f=$1 rc=0
  shift
  e2fsck -fy "$@" "$f" >/dev/null 2>&1 || rc=$?
  if [ "$rc" -gt 1 ]; then
    echo "make-seeds.sh: e2fsck $* $f exited with $rc" >&2
    return 1
  fi
}

for c in "${configs[@]}"; do
  IFS='|' read -r name args size <<<"$c"
  if [[ "$args" == *fast_commit* ]] && ! mke2fs -q -F -O fast_commit "$work/probe.img" 8M \
    >/dev/null 2>&1; then
    echo "make-seeds.sh: mke2fs does not know fast_commit; skipping $name" >&2
    continue
  fi
  # shellcheck disable=SC2086
  mke2fs -q -F -U "$uuid" -E hash_seed="$hash_seed" -L "$name" $args -d "$tree" \
    "$img/$name.img" "$size" >/dev/null
  if [[ "$args" == *quota* ]]; then
    fsck_fix "$img/$name.img"
  fi
done
rm -f "$work/probe.img"

# Copies whose directories e2fsck -D indexes (mke2fs -d writes linear
# directories), two of them with the legacy and TEA default hash.
for name in ext4 ext4-1k ext4-nocsum ext3 ext2-128 ext4-bigalloc ext4-no64-noflex; do
  cp --sparse=always "$img/$name.img" "$img/$name.dx.img"
  fsck_fix "$img/$name.dx.img" -D
done
for alg in tea legacy; do
  cp --sparse=always "$img/ext4-1k.img" "$img/ext4-1k-$alg.dx.img"
  tune2fs -E hash_alg=$alg "$img/ext4-1k-$alg.dx.img" >/dev/null
  fsck_fix "$img/ext4-1k-$alg.dx.img" -D
done

# Journals with committed transactions: mount a copy, change it in three
# synced steps and copy the image while it is still mounted, so that the
# journal is not checkpointed. One CPU and no delayed allocation keep the
# block allocation the same from run to run; journal-canon then fixes
# what still depends on the clock.
# name|base image|type|extra mount options|journal-ops options
journals=(
  "ext3|ext3|ext3||"
  "ext3-csum-v1|ext3|ext4|journal_checksum|"
  "ext4-nocsum-async|ext4-nocsum|ext4|data=writeback,journal_async_commit|"
  "ext4|ext4|ext4||"
  "ext4-no64-noflex|ext4-no64-noflex|ext4||"
  "ext4-1k|ext4-1k|ext4||"
  "ext4-fc|ext4-fc|ext4||--fsync"
)
jmnt=$work/jmnt
mkdir -p "$jmnt"
for j in "${journals[@]}"; do
  IFS='|' read -r name base fstype extra ops <<<"$j"
  [ -f "$img/$base.img" ] || continue
  live=$work/live.img
  cp --sparse=always "$img/$base.img" "$live"
  opts=loop,noatime,noinit_itable,commit=300
  [ "$fstype" = ext4 ] && opts=$opts,nodelalloc
  [ -n "$extra" ] && opts=$opts,$extra
  if ! mount -t "$fstype" -o "$opts" "$live" "$jmnt" 2>"$work/mount.err"; then
    echo "make-seeds.sh: cannot mount $name with $opts: $(cat "$work/mount.err")" >&2
    rm -f "$live"
    continue
  fi
  # shellcheck disable=SC2086
  taskset -c 0 python3 "$py" journal-ops "$jmnt" $ops
  cp --sparse=always "$live" "$img/journal-$name.img"
  umount "$jmnt"
  rm -f "$live"
  python3 "$py" journal-canon "$img/journal-$name.img"
  python3 "$py" journal-summary "$img/journal-$name.img"
  log=$(debugfs -R logdump "$img/journal-$name.img" 2>/dev/null)
  for kind in "descriptor block" "revoke table" "commit block"; do
    grep -q "($kind)" <<<"$log" || echo "make-seeds.sh: $name: logdump shows no $kind" >&2
  done
  # Replaying the rewritten journal must not find a bad checksum.
  cp --sparse=always "$img/journal-$name.img" "$work/replay.img"
  if e2fsck -fy "$work/replay.img" 2>&1 | grep -qi "corrupt\|checksum error\|invalid"; then
    echo "make-seeds.sh: $name: journal replay reports damage" >&2
  fi
  rm -f "$work/replay.img"
done

python3 "$py" extract "$img" "$out"
