#!/usr/bin/env bash
# Builds the benchmark images, cached outside the repository:
#
#   files   ~1M inodes, 99% regular files of 1-16 KiB (pFSCK's file-intensive)
#   medium  ~1M inodes, 25% directories
#   dirs    ~1M inodes, 50% directories with one file each (directory-intensive)
#   aged    a file system aged through a loop mount: creates, deletes, appends
#
#   benches/make-bench-images.sh [NAME...]
#
# Images go to $EXT4CHK_BENCH_DIR (default ~/.cache/ext4chk-bench); an
# existing image is kept. Needs mke2fs, python3 and, for "aged", root
# (loop mounts). The source trees are built in /dev/shm when it has room.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${EXT4CHK_BENCH_DIR:-$HOME/.cache/ext4chk-bench}
mkdir -p "$out"
export MKE2FS_CONFIG="$here/../fixtures/mke2fs.conf" LC_ALL=C
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(files medium dirs aged)
scratch_base=/dev/shm
[ -w "$scratch_base" ] || scratch_base=$out

gen_tree() { # gen_tree DIR DIRS FILES_PER_DIR
  python3 - "$1" "$2" "$3" <<'PY'
import os, random, sys
root, ndirs, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
r = random.Random(42)
pool = os.urandom(1 << 20)
os.makedirs(root, exist_ok=True)
fanout = 100
made = 0
for d in range(ndirs):
    # Spread directories over a two-level tree so no directory is huge.
    path = os.path.join(root, f"t{d // (fanout * fanout)}", f"u{(d // fanout) % fanout}", f"d{d}")
    os.makedirs(path, exist_ok=True)
    for f in range(per):
        size = r.randint(1, 16) * 1024 - r.randrange(0, 1024)
        off = r.randrange(0, len(pool) - size)
        with open(os.path.join(path, f"f{f}"), "wb") as fh:
            fh.write(pool[off:off + size])
        made += 1
print(f"{ndirs} directories, {made} files", file=sys.stderr)
PY
}

build() { # build NAME DIRS FILES_PER_DIR SIZE
  local name=$1 img="$out/$1.img"
  if [ -f "$img" ]; then echo "$img (cached)"; return; fi
  local tree="$scratch_base/ext4chk-tree-$name"
  rm -rf "$tree"
  gen_tree "$tree" "$2" "$3"
  mke2fs -q -F -t ext4 -N 1100000 -L "bench-$name" -d "$tree" "$img.tmp" "$4"
  rm -rf "$tree"
  mv "$img.tmp" "$img"
  echo "$img"
}

aged() {
  local img="$out/aged.img"
  if [ -f "$img" ]; then echo "$img (cached)"; return; fi
  mke2fs -q -F -t ext4 -N 800000 -L bench-aged "$img.tmp" 12G
  local mnt
  mnt=$(mktemp -d)
  mount -o loop "$img.tmp" "$mnt"
  trap 'umount "$mnt" 2>/dev/null; rmdir "$mnt" 2>/dev/null' EXIT
  python3 - "$mnt" <<'PY'
import os, random, sys
root = sys.argv[1]
r = random.Random(7)
pool = os.urandom(1 << 20)
live = []
def write(path, size, mode="wb"):
    off = r.randrange(0, len(pool) - size)
    with open(path, mode) as fh:
        fh.write(pool[off:off + size])
for rnd in range(6):
    for i in range(120000):
        d = os.path.join(root, f"p{r.randrange(300)}", f"q{r.randrange(40)}")
        os.makedirs(d, exist_ok=True)
        p = os.path.join(d, f"r{rnd}-{i}")
        write(p, r.choice([0, 700, 3000, 9000, 20000, 40000]))
        live.append(p)
    r.shuffle(live)
    for p in live[:40000]:
        os.remove(p)
    live = live[40000:]
    for p in live[:20000]:
        write(p, r.choice([1000, 8000, 30000]), "ab")
print(f"{len(live)} files live", file=sys.stderr)
PY
  sync
  umount "$mnt"
  rmdir "$mnt"
  trap - EXIT
  mv "$img.tmp" "$img"
  echo "$img"
}

for n in "${names[@]}"; do
  case $n in
    files) build files 10000 99 16G ;;
    medium) build medium 250000 3 12G ;;
    dirs) build dirs 500000 1 10G ;;
    aged) aged ;;
    *) echo "unknown image $n" >&2; exit 2 ;;
  esac
done
