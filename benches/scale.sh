#!/usr/bin/env bash
# Times ext4chk against e2fsck on ext4-synth images of growing size, in
# the same run, and writes the "Scale" section of BENCHMARKS.md.
#
#   benches/scale.sh [-r ROUNDS] [-n "1000000 3000000 10000000 30000000"] [-m "warm cold"] [-d] [-k] [-o FILE]
#
# For each inode count an image is written with ext4-synth (default tree:
# 100 files and 10 subdirectories per directory, one data block per file)
# into $EXT4CHK_BENCH_DIR (default ~/.cache/ext4chk-bench) and removed
# afterwards. Each round runs `e2fsck -fn` and `ext4chk -n --threads auto`,
# in turn first; warm rounds follow one untimed run of each, cold rounds
# drop the page cache (root) before every run. /usr/bin/time -v records
# wall, user and sys time, peak RSS and the bytes read from the device.
# The device's O_DIRECT sequential read rate is measured in the same run
# on a 2 GiB file of random bytes (the images are sparse). Medians are reported; every raw run is listed.
# With -d, `ext4chk -n --direct-io on` (O_DIRECT, the default for block
# devices) is timed too. Sizes not measured in this run keep their rows:
# the section carries its raw runs and image facts, and only the sizes
# measured now are replaced. With -k, images are kept after the run and an
# image kept by an earlier run is used again (with what ext4-synth said
# when it wrote it, saved beside it) instead of being written anew.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
rounds=3
sizes="1000000 3000000 10000000 30000000"
modes="warm cold"
out="$root/BENCHMARKS.md"
direct=0
keep=0
while getopts "r:n:m:dko:" opt; do
  case $opt in
    r) rounds=$OPTARG ;;
    n) sizes=$OPTARG ;;
    m) modes=$OPTARG ;;
    d) direct=1 ;;
    k) keep=1 ;;
    o) out=$OPTARG ;;
    *) sed -n 2,20p "$0"; exit 2 ;;
  esac
done
dir=${EXT4CHK_BENCH_DIR:-$HOME/.cache/ext4chk-bench}
mkdir -p "$dir"
e2fsck=$(command -v e2fsck || echo /sbin/e2fsck)
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (apt-get install time)" >&2; exit 1; }
[ -x "$e2fsck" ] || { echo "needs e2fsck" >&2; exit 1; }
if [[ " $modes " == *" cold "* ]] && ! [ -w /proc/sys/vm/drop_caches ]; then
  echo "cold runs need root (drop_caches)" >&2; exit 1
fi
(cd "$root" && cargo build --release --workspace --quiet)
bin="$root/target/release/ext4chk"
synth="$root/target/release/ext4-synth"
raw=$(mktemp)
facts=$(mktemp)
tmp=$(mktemp)
trap 'rm -f "$raw" "$facts" "$tmp"' EXIT
export LC_ALL=C E2FSCK_CONFIG=/dev/null

drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }

run_one() { # run_one N IMAGE MODE ROUND TOOL
  [ "$3" = cold ] && drop
  case $5 in
    e2fsck) /usr/bin/time -v -o "$tmp" "$e2fsck" -fn "$2" > /dev/null 2>&1 || true ;;
    ext4chk) /usr/bin/time -v -o "$tmp" "$bin" -n --threads auto "$2" > /dev/null 2>&1 || true ;;
    direct) /usr/bin/time -v -o "$tmp" "$bin" -n --threads auto --direct-io on "$2" > /dev/null 2>&1 || true ;;
  esac
  python3 "$here/timev.py" "$tmp" wall,user,sys,rss,read "$1" "$3" "$4" "$5" >> "$raw"
  echo "$1 $3 round $4 $5: $(tail -1 "$raw" | cut -f5-9)" >&2
}

# The device's O_DIRECT sequential read rate, measured on a written
# (not sparse) 2 GiB file beside the images, in the same run.
rate_file="$dir/rate.bin"
dd if=/dev/urandom of="$rate_file" bs=4M count=512 status=none
sync
drop
rate=$(dd if="$rate_file" of=/dev/null bs=4M iflag=direct 2>&1 | awk '/copied/ {print $(NF-1), $NF}')
rm -f "$rate_file"
echo "O_DIRECT sequential read: $rate" >&2

for n in $sizes; do
  img="$dir/synth-$n.img"
  if [ $keep = 1 ] && [ -f "$img" ] && [ -f "$img.made" ]; then
    made=$(cat "$img.made")
    gen=$(cat "$img.gen" 2>/dev/null || echo "?")
    echo "using the kept $img" >&2
  else
    start=$(date +%s.%N)
    made=$("$synth" --inodes "$n" "$img")
    gen=$(python3 -c "import time; print(f'{time.time() - $start:.1f}')")
    echo "$made" > "$img.made"
    echo "$gen" > "$img.gen"
  fi
  echo "$made" >&2
  summary=$("$bin" -n "$img" 2>/dev/null | tail -1 | sed 's/^[^:]*: //')
  echo -e "$n\t$gen\t$rate\t$(du -k "$img" | cut -f1)\t$summary\t$made\t$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)" >> "$facts"
  for m in $modes; do
    if [ "$m" = warm ]; then
      "$e2fsck" -fn "$img" > /dev/null 2>&1 || true
      "$bin" -n "$img" > /dev/null 2>&1 || true
    fi
    for r in $(seq 1 "$rounds"); do
      if [ $direct = 1 ]; then
        case $((r % 3)) in
          1) order="e2fsck ext4chk direct" ;;
          2) order="ext4chk direct e2fsck" ;;
          *) order="direct e2fsck ext4chk" ;;
        esac
      elif [ $((r % 2)) -eq 1 ]; then order="e2fsck ext4chk"; else order="ext4chk e2fsck"; fi
      for t in $order; do run_one "$n" "$img" "$m" "$r" "$t"; done
    done
  done
  [ $keep = 1 ] || rm -f "$img" "$img.made" "$img.gen"
done

machine="$(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $(uname -r)"
ver=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
python3 - "$raw" "$facts" "$out" "$machine" "$ver" "$rounds" <<'PY'
import sys, statistics
raw, facts, out, machine, ver, rounds = sys.argv[1:]
runs = [l.rstrip("\n").split("\t") for l in open(raw) if l.strip()]
fact = {}
for l in open(facts):
    p = l.rstrip("\n").split("\t")
    fact[p[0]] = p
# Keep the runs and facts of sizes not measured in this run.
try:
    old = open(out).read()
except FileNotFoundError:
    old = ""
if "<!-- scale -->" in old and "<!-- /scale -->" in old:
    sec = old[old.index("<!-- scale -->"):old.index("<!-- /scale -->")]
    now = {r[0] for r in runs}
    if "```" in sec:
        body = sec.split("```")[1]
        runs += [l.split("\t") for l in body.strip("\n").split("\n")
                 if l.strip() and l.split("\t")[0] not in now]
    if "<!-- facts" in sec:
        body = sec[sec.index("<!-- facts") + len("<!-- facts"):]
        body = body[:body.index("-->")]
        for l in body.strip("\n").split("\n"):
            p = l.split("\t")
            if l.strip() and p[0] not in now:
                fact[p[0]] = p
def med(n, mode, tool, col):
    xs = [float(r[col]) for r in runs if r[0] == n and r[1] == mode and r[3] == tool]
    return statistics.median(xs) if xs else None
L = ["<!-- scale -->", "## Scale: ext4-synth images from 1M inodes up", "",
     f"`benches/scale.sh` ({machine}; paired rounds in turn, medians; each size's commit and rounds are in the tables; "
     "`ext4chk -n --threads auto` against `e2fsck -fn`, in turn first). Images: "
     "`ext4-synth --inodes N` (100 files and 10 subdirectories per directory, one "
     "data block per file, 8,192 inodes per group).", "",
     "| inodes | mode | e2fsck s | ext4chk s | e2fsck ÷ ext4chk | e2fsck RSS MiB | ext4chk RSS MiB | ext4chk bytes/inode RSS | ext4chk µs/inode | read by ext4chk | share of O_DIRECT rate |",
     "|---|---|---|---|---|---|---|---|---|---|---|"]
sizes = sorted({r[0] for r in runs}, key=int)
for n in sizes:
    f = fact.get(n, [n, "", "", "", "", ""])
    rate = f[2]
    mbps = None
    try:
        val, unit = rate.split()
        mbps = float(val) * {"GB/s": 1000, "MB/s": 1, "kB/s": 0.001}.get(unit, 1)
    except ValueError:
        pass
    for mode in ("warm", "cold"):
      for tool, label in (("ext4chk", ""), ("direct", " (O_DIRECT)")):
        e = med(n, mode, "e2fsck", 4)
        x = med(n, mode, tool, 4)
        if e is None or x is None:
            continue
        er = med(n, mode, "e2fsck", 7) / 1024
        xr = med(n, mode, tool, 7) / 1024
        rd = med(n, mode, tool, 8)
        share = ""
        if mode == "cold" and mbps and x > 0:
            share = f"{rd / x / 1e6 / mbps * 100:.0f}%"
        inodes = int(n)
        L.append(f"| {inodes:,} | {mode}{label} | {e:.2f} | {x:.2f} | {e / x:.2f} | {er:.0f} | {xr:.0f} | "
                 f"{xr * 1048576 / inodes:.1f} | {x / inodes * 1e6:.2f} | {rd / 1e9:.2f} GB | {share} |")
L += ["", "| inodes | measured at commit | image written in | O_DIRECT sequential read | image on disk | ext4chk's summary |",
      "|---|---|---|---|---|---|"]
for n in sizes:
    f = fact.get(n)
    if f:
        at = f[6] if len(f) > 6 else ver
        L.append(f"| {int(n):,} | {at} | {f[1]} s | {f[2]} | {int(f[3]) / 1048576:.1f} GiB | {f[4]} |")
L += ["", "Raw runs (inodes, mode, round, tool, wall s, user s, sys s, peak RSS KiB, bytes read):", "", "```"]
L += ["\t".join(r) for r in sorted(runs, key=lambda r: (int(r[0]), r[1] != "warm", int(r[2])))]
L += ["```", "", "<!-- facts"]
L += ["\t".join(fact[n]) for n in sorted(fact, key=int)]
L += ["-->", "<!-- /scale -->", ""]
text = "\n".join(L)
if "<!-- scale -->" in old:
    a = old.index("<!-- scale -->")
    b = old.index("<!-- /scale -->") + len("<!-- /scale -->\n") if "<!-- /scale -->" in old else len(old)
    new = old[:a] + text + old[b:]
else:
    new = old.rstrip("\n") + "\n\n" + text
open(out, "w").write(new)
print(f"wrote the Scale section of {out}", file=sys.stderr)
PY
