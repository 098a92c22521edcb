#!/usr/bin/env bash
# Times a repair the way an outage meets it: the page cache dropped before
# every run, damaged images of bench size, and e2fsck -fy, ext4chk -y and
# ext4chk -n each run on the same damaged image in the same round. Writes
# the results into BENCHMARKS.md (between the repair markers).
#
#   benches/repair_vs_e2fsck.sh [-r ROUNDS] [-n "100 2000 10000"] [-i "medium dirs 10m 100m"] [-a AFTER]
#
# -a AFTER: judge the results with e2fsck -fn in the first AFTER rounds
# only (default: every round). At 100M inodes each e2fsck -fn takes
# about six minutes. Rows already in BENCHMARKS.md for an image and count
# this run does not measure are kept.
#
# Images: "medium" and "dirs" (about 1M inodes, 25% and 50% directories)
# come from benches/make-bench-images.sh; "10m" and "100m" are written by
# ext4-synth. All are cached in $EXT4CHK_BENCH_DIR (default
# ~/.cache/ext4chk-bench). The 10m and 100m images are only damaged with
# the largest count.
#
# Each round injects N problems with debugfs into a copy of the image:
# cleared inodes whose entries then dangle, freed inodes and blocks still
# in use, wrong link counts, deletion times on live inodes, wrong group
# counts, directory blocks zeroed, and extents redirected onto other
# files' blocks (blocks claimed twice). Each tool then runs on a copy of
# that damaged image of its own, alternating which goes first; the result
# is judged by e2fsck -fn (-n and the second repair run on the damaged
# image itself). Copies are reflinks where the bench directory's
# file system has them (XFS, btrfs; 93 s for the 100M-inode image),
# sparse copies elsewhere. Needs root (drop_caches), debugfs and
# /usr/bin/time.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
rounds=3
counts="100 2000 10000"
images="medium dirs 10m 100m"
judged=1000000
while getopts "r:n:i:a:" opt; do
  case $opt in
    r) rounds=$OPTARG ;;
    n) counts=$OPTARG ;;
    i) images=$OPTARG ;;
    a) judged=$OPTARG ;;
    *) sed -n 2,28p "$0"; exit 2 ;;
  esac
done
dir=${EXT4CHK_BENCH_DIR:-$HOME/.cache/ext4chk-bench}
mkdir -p "$dir"
export LC_ALL=C E2FSCK_CONFIG=/dev/null
e2fsck=$(command -v e2fsck || echo /sbin/e2fsck)
(cd "$root" && cargo build --release --quiet --workspace)
bin="$root/target/release/ext4chk"
synth="$root/target/release/ext4-synth"
work="$dir/repair-work"
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT

copy() { # copy SRC DST: a reflink where the file system has them
  # (with --sparse=always cp scans a 100M-inode image's 1.6 TB of holes)
  cp --reflink=always "$1" "$2" 2> /dev/null || cp --sparse=always "$1" "$2"
}

base_image() { # base_image NAME -> path
  local name=$1
  case $name in
    medium | dirs)
      "$here/make-bench-images.sh" "$name" >&2
      echo "$dir/$name.img"
      ;;
    10m | 100m)
      local n=$((${name%m} * 1000000)) img="$dir/synth-$name.img"
      if [ ! -f "$img" ]; then
        "$synth" --inodes "$n" --files-per-dir 1000 "$img.tmp" >&2
        mv "$img.tmp" "$img"
      fi
      echo "$img"
      ;;
    *) echo "unknown image $name" >&2; exit 2 ;;
  esac
}

cold() {
  sync
  echo 3 > /proc/sys/vm/drop_caches
}

inject() { # inject DEVICE N SEED
  python3 - "$1" "$2" "$3" <<'PY'
import random, re, subprocess, sys
dev, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
r = random.Random(seed)
h = subprocess.run(["dumpe2fs", "-h", dev], capture_output=True, text=True).stdout
num = lambda k: int(re.search(k + r":\s+(\d+)", h).group(1))
icount, ifree = num("Inode count"), num("Free inodes")
bcount, bpg = num("Block count"), num("Blocks per group")
groups = (bcount + bpg - 1) // bpg
# The tree's inodes were made in order: most of 12..used are in use.
hi = 12 + (icount - ifree)
kinds = ["clri", "freei", "freeb", "links", "dtime", "bgfree", "dirblk", "dup"]
cmds = []
for k in range(n):
    kind = kinds[k % len(kinds)]
    ino = r.randrange(12, hi)
    if kind == "clri":
        cmds.append(f"clri <{ino}>")
    elif kind == "freei":
        cmds.append(f"freei <{ino}>")
    elif kind == "freeb":
        cmds.append(f"freeb {r.randrange(bcount // 8, bcount // 2)}")
    elif kind == "links":
        cmds.append(f"sif <{ino}> links_count {r.randint(2, 9)}")
    elif kind == "dtime":
        cmds.append(f"sif <{ino}> dtime 12345678")
    elif kind == "bgfree":
        g = r.randrange(groups)
        cmds.append(f"set_bg {g} free_blocks_count {r.randrange(bpg)}")
        cmds.append(f"set_bg {g} checksum calc")
    elif kind == "dirblk":
        cmds.append(f"zap_block -f <{ino}> 0")
    else:
        # The first extent of an inode held in the inode (ee_start_lo,
        # i_block[5]) moved onto another inode's first extent's blocks.
        other = r.randrange(12, hi)
        out = subprocess.run(["debugfs", "-R", f"stat <{other}>", dev],
                             capture_output=True, text=True).stdout
        m = re.search(r"EXTENTS:\n\(0[^)]*\):(\d+)", out)
        if m:
            cmds.append(f"sif <{ino}> block[5] {m.group(1)}")
path = "/tmp/ext4chk-inject.cmds"
open(path, "w").write("\n".join(cmds) + "\n")
subprocess.run(["debugfs", "-w", "-f", path, dev], capture_output=True)
PY
}

run_timed() { # run_timed OUT CMD...: /usr/bin/time -v into OUT
  local out=$1
  shift
  /usr/bin/time -v -o "$out" "$@" > "$work/stdout" 2> "$work/stderr" || true
}

raw="$work/raw.tsv"
: > "$raw"
for name in $images; do
  base=$(base_image "$name")
  ns=$counts
  case $name in 10m | 100m) ns=$(echo "$counts" | tr ' ' '\n' | sort -n | tail -1) ;; esac
  for n in $ns; do
    for ((r = 1; r <= rounds; r++)); do
      damaged="$work/damaged.img"
      copy "$base" "$damaged"
      inject "$damaged" "$n" "$r"
      order="e x"
      [ $((r % 2)) -eq 0 ] && order="x e"
      problems=0
      for who in n $order; do
        # ext4chk -n never writes, and the last repair of the round may
        # have the damaged image itself: one copy a round, not three (a
        # reflink of the 100M-inode image takes a minute and a half).
        if [ "$who" = n ] || [ "$who" = "${order##* }" ]; then
          dev=$damaged
        else
          dev="$work/run.img"
          copy "$damaged" "$dev"
        fi
        cold
        case $who in
          n)
            run_timed "$work/t" "$bin" -n --format json "$dev"
            problems=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["findings"]))' "$work/stdout" 2>/dev/null || echo 0)
            label="ext4chk -n"; extra="-"
            ;;
          e)
            run_timed "$work/t" "$e2fsck" -fy "$dev"
            label="e2fsck -fy"; extra="-"
            ;;
          x)
            run_timed "$work/t" "$bin" -y --format json "$dev"
            extra=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["repair"]; print(str(len(r["rounds"])) + "/" + str(len(r["check_seconds"])))' "$work/stdout" 2>/dev/null || echo "?")
            label="ext4chk -y"
            ;;
        esac
        after=-
        if [ "$who" != n ] && [ "$r" -le "$judged" ]; then
          after=$("$e2fsck" -fn "$dev" > /dev/null 2>&1; echo $?)
        fi
        row=$(python3 "$here/timev.py" "$work/t" wall,rss "$name" "$n" "$r" "$label")
        echo -e "$row\t$after\t$problems\t$extra" >> "$raw"
        tail -1 "$raw" >&2
        [ "$dev" = "$damaged" ] || rm -f "$dev"
      done
      rm -f "$damaged"
    done
  done
done

python3 - "$raw" "$root/BENCHMARKS.md" "$rounds" <<'PY'
import os, statistics, sys
raw, out, rounds = sys.argv[1:]
rows = [l.rstrip("\n").split("\t") for l in open(raw) if l.strip()]
# The raw rows of images and counts this run did not measure stay.
measured = {(r[0], r[1]) for r in rows}
old = open(out).read() if os.path.exists(out) else ""
if "<!-- repair:start -->" in old:
    sec = old[old.index("<!-- repair:start -->"):old.index("<!-- repair:end -->")]
    kept = []
    if "Raw runs:" in sec:
        for l in sec.split("Raw runs:", 1)[1].splitlines():
            c = [x.strip() for x in l.strip().strip("|").split("|")]
            if len(c) == 9 and c[2].isdigit() and (c[0], c[1]) not in measured:
                kept.append(c)
    rows = kept + rows
# image, n, round, command, wall, rss, e2fsck -fn after, problems, rounds/checks
med = lambda xs: statistics.median(xs) if xs else float("nan")
L = ["<!-- repair:start -->", "## Repair: cold, damaged, against e2fsck -fy", "",
     "Written by `benches/repair_vs_e2fsck.sh`: the page cache is dropped before every run;",
     "each round damages a copy of the image with debugfs (cleared inodes,",
     "freed inodes and blocks still in use, wrong link counts, deletion times on live inodes,",
     "wrong group counts, zeroed directory blocks, extents moved onto other files' blocks),",
     "then `ext4chk -n`, `e2fsck -fy` and `ext4chk -y` each run on a copy of that damaged",
     f"image. Medians of {rounds} rounds. `rounds/checks` is ext4chk's fixing rounds and the",
     "checks it ran (the last verifies); `-fn after` is the real e2fsck on each result (`-` in a round", "not judged: see `-a`). Rows of images and counts not measured in the same run are kept from", "the run before.", "",
     "| image | injected | problems (-n) | ext4chk -n s | e2fsck -fy s | ext4chk -y s | e2fsck ÷ ext4chk -y | ext4chk -y ÷ -n | rounds/checks | peak RSS MiB e2fsck / ext4chk -y | -fn after |",
     "|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|"]
keys = []
for r in rows:
    if (r[0], r[1]) not in keys:
        keys.append((r[0], r[1]))
for img, n in keys:
    sel = [r for r in rows if r[0] == img and r[1] == n]
    w = lambda c: med([float(r[4]) for r in sel if r[3] == c])
    rss = lambda c: med([int(r[5]) for r in sel if r[3] == c]) / 1024
    nw, ew, xw = w("ext4chk -n"), w("e2fsck -fy"), w("ext4chk -y")
    probs = med([int(r[7]) for r in sel if r[3] == "ext4chk -n"])
    rc = ",".join(sorted(set(r[8] for r in sel if r[3] == "ext4chk -y")))
    after = ",".join(sorted(set(r[6] for r in sel if r[3] != "ext4chk -n" and r[6] != "-")))
    L.append(f"| {img} | {n} | {probs:.0f} | {nw:.2f} | {ew:.2f} | {xw:.2f} | {ew / xw:.2f} | {xw / nw:.2f} | {rc} | {rss('e2fsck -fy'):.0f} / {rss('ext4chk -y'):.0f} | {after} |")
L += ["", "Raw runs:", "", "| image | injected | round | command | wall s | peak RSS KiB | -fn after | problems | rounds/checks |",
      "|---|---:|---:|---|---:|---:|---|---:|---|"]
for r in rows:
    L.append("| " + " | ".join(r) + " |")
L.append("<!-- repair:end -->")
section = "\n".join(L) + "\n"
text = open(out).read() if os.path.exists(out) else ""
if "<!-- repair:start -->" in text:
    a = text.index("<!-- repair:start -->")
    b = text.index("<!-- repair:end -->") + len("<!-- repair:end -->\n")
    text = text[:a] + section + text[b:]
else:
    text = text.rstrip("\n") + "\n\n" + section
open(out, "w").write(text)
print(f"wrote the repair section of {out}", file=sys.stderr)
PY
cp "$raw" "$dir/repair-raw-$(date +%Y%m%d-%H%M%S).tsv"

