#!/usr/bin/env bash
# Times ext4chk --repair against e2fsck -fy on the same damaged image, with
# 100, 1,000 and 10,000 injected problems (like pFSCK's Figure 11), and
# writes the results into BENCHMARKS.md (between the repair markers).
#
#   benches/repair_vs_e2fsck.sh [-r ROUNDS] [-n "100 1000 10000"]
#
# The base image (about 200,000 inodes: 20,000 directories of 9 files) is
# cached in $EXT4CHK_BENCH_DIR (default ~/.cache/ext4chk-bench). Each
# round copies it, injects N problems with debugfs (wrong link counts,
# sizes, deletion times, removed entries that leave files unattached,
# freed blocks and inodes still in use), and repairs one copy with each
# tool, alternating which goes first; both results are then checked with
# e2fsck -fn.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
rounds=3
counts="100 1000 10000"
while getopts "r:n:" opt; do
  case $opt in
    r) rounds=$OPTARG ;;
    n) counts=$OPTARG ;;
    *) sed -n 2,14p "$0"; exit 2 ;;
  esac
done
dir=${EXT4CHK_BENCH_DIR:-$HOME/.cache/ext4chk-bench}
mkdir -p "$dir"
export LC_ALL=C E2FSCK_CONFIG=/dev/null MKE2FS_CONFIG="$root/fixtures/mke2fs.conf"
e2fsck=$(command -v e2fsck || echo /sbin/e2fsck)
(cd "$root" && cargo build --release --quiet)
bin="$root/target/release/ext4chk"
base="$dir/repair-base.img"
work=${TMPDIR:-/tmp}/ext4chk-repair-bench
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT

if [ ! -f "$base" ]; then
  tree=$(mktemp -d /dev/shm/ext4chk-rtree.XXXXXX 2>/dev/null || mktemp -d)
  python3 - "$tree" <<'PY'
import os, random, sys
root = sys.argv[1]
r = random.Random(11)
for d in range(20000):
    p = os.path.join(root, f"a{d // 200}", f"b{d}")
    os.makedirs(p, exist_ok=True)
    for f in range(9):
        with open(os.path.join(p, f"f{f}"), "wb") as fh:
            fh.write(os.urandom(r.randint(1, 12) * 1024 - r.randrange(1024)))
PY
  mke2fs -q -F -t ext4 -N 240000 -d "$tree" "$base.tmp" 3G
  rm -rf "$tree"
  mv "$base.tmp" "$base"
fi

inject() { # inject IMG N SEED
  python3 - "$1" "$2" "$3" <<'PY'
import random, subprocess, sys
img, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
r = random.Random(seed)
# Inodes 12.. are the tree (directories and files, in creation order).
cmds = []
kinds = ["links", "size", "dtime", "unlink", "freeb", "freei"]
for k in range(n):
    kind = kinds[k % len(kinds)]
    d = r.randrange(20000)
    f = r.randrange(9)
    path = f"/a{d // 200}/b{d}/f{f}"
    if kind == "links":
        cmds.append(f"sif {path} links_count {r.randint(2, 9)}")
    elif kind == "size":
        cmds.append(f"sif {path} size {r.randint(1, 100000)}")
    elif kind == "dtime":
        cmds.append(f"sif {path} dtime 12345678")
    elif kind == "unlink":
        cmds.append(f"unlink {path}")
    elif kind == "freeb":
        cmds.append(f"freeb {r.randrange(100000, 700000)}")
    else:
        cmds.append(f"freei {path}")
open(img + ".cmds", "w").write("\n".join(cmds) + "\n")
subprocess.run(["debugfs", "-w", "-f", img + ".cmds", img], capture_output=True)
PY
}

raw="$work/raw.tsv"
: > "$raw"
for n in $counts; do
  for ((r = 1; r <= rounds; r++)); do
    cp --sparse=always "$base" "$work/d.img"
    inject "$work/d.img" "$n" "$r"
    cp --sparse=always "$work/d.img" "$work/e.img"
    cp --sparse=always "$work/d.img" "$work/x.img"
    problems=$( ("$bin" -n --format json "$work/d.img" || true) | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["findings"]))')
    order="e x"
    [ $((r % 2)) -eq 0 ] && order="x e"
    for who in $order; do
      sync
      if [ "$who" = e ]; then
        /usr/bin/time -f "%e %U %S %M" -o "$work/t" "$e2fsck" -fy "$work/e.img" > /dev/null 2>&1 || true
        after=$("$e2fsck" -fn "$work/e.img" > /dev/null 2>&1; echo $?)
        echo -e "$n\t$r\te2fsck -fy\t$(tail -1 "$work/t" | tr ' ' '\t')\t$after\t$problems" >> "$raw"
      else
        /usr/bin/time -f "%e %U %S %M" -o "$work/t" "$bin" -y --threads auto "$work/x.img" > /dev/null 2>&1 || true
        after=$("$e2fsck" -fn "$work/x.img" > /dev/null 2>&1; echo $?)
        echo -e "$n\t$r\text4chk -y\t$(tail -1 "$work/t" | tr ' ' '\t')\t$after\t$problems" >> "$raw"
      fi
      echo "$n round $r: $(tail -1 "$raw")" >&2
    done
  done
done

python3 - "$raw" "$root/BENCHMARKS.md" "$rounds" <<'PY'
import sys, statistics
raw, out, rounds = sys.argv[1:]
rows = [l.rstrip("\n").split("\t") for l in open(raw) if l.strip()]
L = ["<!-- repair:start -->", "## Repair: ext4chk --repair against e2fsck -fy", "",
     "Written by `benches/repair_vs_e2fsck.sh`. A 3 GiB ext4 image with about 200,000 inodes",
     "(20,000 directories of 9 files) gets N problems injected with debugfs (wrong link counts,",
     "sizes and deletion times, removed entries, freed blocks and inodes still in use); each tool",
     f"repairs its own copy, alternating which goes first; medians of {rounds} rounds, warm cache.",
     "`problems` is what `ext4chk -n` reports on the damaged image (one injected problem often",
     "causes several); `e2fsck -fn after` is the exit of the real e2fsck on the result.", "",
     "| injected | problems found | command | wall s | user s | sys s | peak RSS MiB | e2fsck -fn after | e2fsck ÷ this |",
     "|---:|---:|---|---:|---:|---:|---:|---|---:|"]
ns = []
for r in rows:
    if r[0] not in ns:
        ns.append(r[0])
for n in ns:
    sel = [r for r in rows if r[0] == n]
    base = statistics.median(float(r[3]) for r in sel if r[2] == "e2fsck -fy")
    for cmd in ["e2fsck -fy", "ext4chk -y"]:
        s = [r for r in sel if r[2] == cmd]
        w = statistics.median(float(r[3]) for r in s)
        u = statistics.median(float(r[4]) for r in s)
        sy = statistics.median(float(r[5]) for r in s)
        rss = statistics.median(int(r[6]) for r in s) / 1024
        after = ",".join(sorted(set(r[7] for r in s)))
        probs = statistics.median(int(r[8]) for r in s)
        ratio = f"{base / w:.2f}" if cmd != "e2fsck -fy" else ""
        L.append(f"| {n} | {probs:.0f} | {cmd} | {w:.2f} | {u:.2f} | {sy:.2f} | {rss:.0f} | {after} | {ratio} |")
L += ["", "Raw runs:", "", "| injected | round | command | wall s | user s | sys s | peak RSS KiB | e2fsck -fn after |",
      "|---:|---:|---|---:|---:|---:|---:|---|"]
for r in rows:
    L.append(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]} | {r[5]} | {r[6]} | {r[7]} |")
L.append("<!-- repair:end -->")
section = "\n".join(L) + "\n"
text = open(out).read() if __import__("os").path.exists(out) else ""
if "<!-- repair:start -->" in text:
    a = text.index("<!-- repair:start -->")
    b = text.index("<!-- repair:end -->") + len("<!-- repair:end -->\n")
    text = text[:a] + section + text[b:]
else:
    text = text.rstrip("\n") + "\n\n" + section
open(out, "w").write(text)
print(f"wrote the repair section of {out}", file=sys.stderr)
PY
