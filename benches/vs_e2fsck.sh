#!/usr/bin/env bash
# Times ext4chk against e2fsck on the same images in the same run and
# writes BENCHMARKS.md.
#
#   benches/vs_e2fsck.sh [-r ROUNDS] [-i "files medium dirs aged"] [-m "warm cold"] [-o FILE]
#
# Each round runs `e2fsck -fn`, `ext4chk -n --threads 1`, `--threads 2`
# and `--threads auto` on one image, the order rotated from round to round
# so that no tool always runs first. Warm rounds follow one untimed run of
# each tool; cold rounds drop the page cache (needs root) before every
# run. /usr/bin/time -v records wall, user and sys time and peak RSS.
# The images come from benches/make-bench-images.sh ($EXT4CHK_BENCH_DIR,
# default ~/.cache/ext4chk-bench); missing ones are built first.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
rounds=3
images="files medium dirs aged"
modes="warm cold"
out="$root/BENCHMARKS.md"
while getopts "r:i:m:o:" opt; do
  case $opt in
    r) rounds=$OPTARG ;;
    i) images=$OPTARG ;;
    m) modes=$OPTARG ;;
    o) out=$OPTARG ;;
    *) sed -n 2,15p "$0"; exit 2 ;;
  esac
done
dir=${EXT4CHK_BENCH_DIR:-$HOME/.cache/ext4chk-bench}
e2fsck=$(command -v e2fsck || echo /sbin/e2fsck)
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (apt-get install time)" >&2; exit 1; }
[ -x "$e2fsck" ] || { echo "needs e2fsck" >&2; exit 1; }
if [[ " $modes " == *" cold "* ]] && ! [ -w /proc/sys/vm/drop_caches ]; then
  echo "cold runs need root (drop_caches)" >&2; exit 1
fi
(cd "$root" && cargo build --release --quiet)
bin="$root/target/release/ext4chk"
for i in $images; do
  [ -f "$dir/$i.img" ] || "$here/make-bench-images.sh" "$i"
done

raw=$(mktemp)
tmp=$(mktemp)
trap 'rm -f "$raw" "$tmp"' EXIT
export LC_ALL=C E2FSCK_CONFIG=/dev/null

cmd_for() { # cmd_for TOOL IMAGE
  case $1 in
    e2fsck) echo "$e2fsck -fn $2" ;;
    t1) echo "$bin -n --threads 1 $2" ;;
    t2) echo "$bin -n --threads 2 $2" ;;
    auto) echo "$bin -n --threads auto $2" ;;
  esac
}

run_one() { # run_one IMAGE MODE ROUND TOOL
  local img="$dir/$1.img"
  if [ "$2" = cold ]; then
    sync
    echo 3 > /proc/sys/vm/drop_caches
  fi
  # shellcheck disable=SC2046
  /usr/bin/time -v -o "$tmp" $(cmd_for "$4" "$img") > /dev/null 2>&1 || true
  python3 "$here/timev.py" "$tmp" wall,user,sys,rss,exit "$1" "$2" "$3" "$4" >> "$raw"
}

tools=(e2fsck t1 t2 auto)
for i in $images; do
  for m in $modes; do
    if [ "$m" = warm ]; then
      for t in "${tools[@]}"; do $(cmd_for "$t" "$dir/$i.img") > /dev/null 2>&1 || true; done
    fi
    for ((r = 1; r <= rounds; r++)); do
      for ((k = 0; k < ${#tools[@]}; k++)); do
        t=${tools[$(((k + r - 1) % ${#tools[@]}))]}
        run_one "$i" "$m" "$r" "$t"
        echo "$i $m round $r $t: $(tail -1 "$raw" | cut -f5-8)" >&2
      done
    done
  done
done

# Facts about each image, from ext4chk's own summary.
facts=$(mktemp)
for i in $images; do
  echo -e "$i\t$("$bin" -n "$dir/$i.img" 2>/dev/null | tail -1 | sed 's/^[^:]*: //')" >> "$facts"
done

machine=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
cores=$(nproc)
mem=$(free -g | awk '/^Mem:/{print $2 " GiB"}')
kernel=$(uname -r)
store=$(df -h "$dir" | awk 'NR==2{print $1}')
ver=$("$bin" --version)
ever=$("$e2fsck" -V 2>&1 | head -1)
rver=$(rustc -V 2>/dev/null || echo unknown)
python3 - "$raw" "$facts" "$out" "$machine" "$cores" "$mem" "$kernel" "$store" "$ver" "$ever" "$rver" "$rounds" <<'PY'
import sys, statistics, datetime
raw, facts, out, machine, cores, mem, kernel, store, ver, ever, rver, rounds = sys.argv[1:]
rows = [l.rstrip("\n").split("\t") for l in open(raw) if l.strip()]
fact = dict(l.rstrip("\n").split("\t", 1) for l in open(facts) if l.strip())
names = {"e2fsck": "e2fsck -fn", "t1": "ext4chk --threads 1", "t2": "ext4chk --threads 2",
         "auto": "ext4chk --threads auto"}
targets = {("dirs", "warm"): 3.0, ("files", "warm"): 2.5, ("aged", "warm"): 2.0,
           ("dirs", "cold"): 2.5}
def med(xs):
    return statistics.median(xs)
L = []
L.append("# Benchmarks: ext4chk against e2fsck")
L.append("")
L.append(f"Written by `benches/vs_e2fsck.sh` on {datetime.date.today()}. Both tools check the")
L.append("same image in the same run; each round runs all four commands in a rotated")
L.append(f"order; figures are medians of {rounds} rounds. *warm*: the image is in the")
L.append("page cache (after one untimed run of each command); *cold*: the page cache is")
L.append("dropped before every run. Ratios are e2fsck's median wall time over ext4chk's.")
L.append("")
L.append(f"- Machine: {machine}, {cores} cores, {mem} memory, kernel {kernel}; images on {store}")
L.append(f"- Versions: {ver}; {ever}; {rver}")
L.append("")
L.append("| image | contents (ext4chk's summary) |")
L.append("|---|---|")
for img, f in fact.items():
    L.append(f"| {img} | {f} |")
L.append("")
L.append("## Results")
L.append("")
L.append("| image | cache | command | wall s | user s | sys s | peak RSS MiB | e2fsck ÷ this |")
L.append("|---|---|---|---:|---:|---:|---:|---:|")
summary = []
order = []
for r in rows:
    k = (r[0], r[1])
    if k not in order:
        order.append(k)
for img, mode in order:
    sel = [r for r in rows if r[0] == img and r[1] == mode]
    by = {}
    for r in sel:
        by.setdefault(r[3], []).append(r)
    base = med([float(r[4]) for r in by.get("e2fsck", [])]) if "e2fsck" in by else None
    base_rss = med([int(r[7]) for r in by.get("e2fsck", [])]) if "e2fsck" in by else None
    for t in ["e2fsck", "t1", "t2", "auto"]:
        if t not in by:
            continue
        w = med([float(r[4]) for r in by[t]])
        u = med([float(r[5]) for r in by[t]])
        s = med([float(r[6]) for r in by[t]])
        rss = med([int(r[7]) for r in by[t]])
        ratio = f"{base / w:.2f}" if base and t != "e2fsck" else ""
        L.append(f"| {img} | {mode} | {names[t]} | {w:.2f} | {u:.2f} | {s:.2f} | {rss / 1024:.0f} | {ratio} |")
        if t != "e2fsck" and base:
            summary.append((img, mode, t, base / w, rss, base_rss))
L.append("")
L.append("## Targets")
L.append("")
L.append("| target | measured | met |")
L.append("|---|---:|---|")
for (img, mode), goal in targets.items():
    for (i, m, t, ratio, _, _) in summary:
        if i == img and m == mode and t == "auto":
            L.append(f"| {img}, {mode}: e2fsck ÷ `--threads auto` ≥ {goal} | {ratio:.2f} | {'yes' if ratio >= goal else 'no'} |")
for (i, m, t, ratio, _, _) in summary:
    if t == "t1" and m == "warm":
        L.append(f"| {i}, warm: e2fsck ÷ `--threads 1` ≥ 1.3 | {ratio:.2f} | {'yes' if ratio >= 1.3 else 'no'} |")
worst = {}
for (i, m, t, ratio, rss, brss) in summary:
    bound = max(brss * 1.5, brss + 64 * 1024)
    key = i
    frac = rss / bound
    if key not in worst or frac > worst[key][0]:
        worst[key] = (frac, rss, brss, bound, t, m)
for i, (frac, rss, brss, bound, t, m) in worst.items():
    L.append(f"| {i}: peak RSS ≤ max(1.5 × e2fsck, e2fsck + 64 MiB) = {bound / 1024:.0f} MiB | {rss / 1024:.0f} MiB (largest: {names[t]}, {m}; e2fsck {brss / 1024:.0f} MiB) | {'yes' if frac <= 1 else 'no'} |")
L.append("")
L.append("## Raw runs")
L.append("")
L.append("| image | cache | round | command | wall s | user s | sys s | peak RSS KiB | exit |")
L.append("|---|---|---:|---|---:|---:|---:|---:|---:|")
for r in rows:
    L.append(f"| {r[0]} | {r[1]} | {r[2]} | {names[r[3]]} | {r[4]} | {r[5]} | {r[6]} | {r[7]} | {r[8]} |")
L.append("")
text = "\n".join(L) + "\n"
# Keep any hand-written analysis that follows the generated part.
marker = "<!-- analysis -->"
try:
    old = open(out).read()
    if marker in old:
        text += "\n" + old[old.index(marker):]
except FileNotFoundError:
    pass
open(out, "w").write(text)
print(f"wrote {out}", file=sys.stderr)
PY
rm -f "$facts"
