#!/usr/bin/env bash
# Cold checks, page cache against O_DIRECT, on image files and on loop
# devices standing in for block devices; writes the "Cold reads" section
# of BENCHMARKS.md.
#
#   benches/cold.sh [-r ROUNDS] [-i "dirs files aged"] [-o FILE]
#
# Every run starts with the page cache dropped (needs root). For each
# image, in the same run and in rotated order:
#   file: e2fsck -fn, ext4chk -n (page cache, the default for files),
#         ext4chk -n --direct-io on;
#   loop: the image behind a read-only loop device with --direct-io=on:
#         e2fsck -fn, ext4chk -n (O_DIRECT, the default for block
#         devices), ext4chk -n --direct-io off.
# /usr/bin/time -v records wall, user and sys time, peak RSS and the bytes
# read from storage. The device is measured in the same run with fio
# (apt-get install fio) on a written 2 GiB file beside the images:
# O_DIRECT sequential reads (1 MiB, queue depth 16) and random 4 KiB reads
# at queue depths 1 and 32. Medians are reported; every raw run is listed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
rounds=3
images="dirs files aged"
out="$root/BENCHMARKS.md"
while getopts "r:i:o:" opt; do
  case $opt in
    r) rounds=$OPTARG ;;
    i) images=$OPTARG ;;
    o) out=$OPTARG ;;
    *) sed -n 2,19p "$0"; exit 2 ;;
  esac
done
dir=${EXT4CHK_BENCH_DIR:-$HOME/.cache/ext4chk-bench}
e2fsck=$(command -v e2fsck || echo /sbin/e2fsck)
for t in /usr/bin/time fio losetup; do
  command -v "$t" > /dev/null || { echo "needs $t" >&2; exit 1; }
done
[ -w /proc/sys/vm/drop_caches ] || { echo "needs root (drop_caches, loop devices)" >&2; exit 1; }
(cd "$root" && cargo build --release --quiet)
bin="$root/target/release/ext4chk"
for i in $images; do
  [ -f "$dir/$i.img" ] || "$here/make-bench-images.sh" "$i"
done
raw=$(mktemp)
dev=$(mktemp)
tmp=$(mktemp)
loopdev=""
trap 'rm -f "$raw" "$dev" "$tmp"; [ -n "$loopdev" ] && losetup -d "$loopdev" 2>/dev/null; true' EXIT
export LC_ALL=C E2FSCK_CONFIG=/dev/null

drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }

# The device, in the same run.
rate_file="$dir/rate.bin"
dd if=/dev/urandom of="$rate_file" bs=4M count=512 status=none
sync
fio_one() { # fio_one NAME RW BS DEPTH
  drop
  fio --name="$1" --filename="$rate_file" --readonly --direct=1 --rw="$2" --bs="$3" \
    --iodepth="$4" --ioengine=io_uring --runtime=10 --time_based --output-format=terse \
    --terse-version=3 2>/dev/null | awk -F';' -v n="$1" '{printf "%s\t%.0f\t%.0f\n", n, $7 * 1024, $8}'
}
{
  fio_one seq read 1M 16
  fio_one rand-qd1 randread 4k 1
  fio_one rand-qd32 randread 4k 32
} > "$dev"
rm -f "$rate_file"
cat "$dev" >&2

cmd_for() { # cmd_for TOOL TARGET
  case $1 in
    e2fsck) echo "$e2fsck -fn $2" ;;
    default) echo "$bin -n $2" ;;
    direct) echo "$bin -n --direct-io on $2" ;;
    buffered) echo "$bin -n --direct-io off $2" ;;
  esac
}

run_one() { # run_one IMAGE PLACE ROUND TOOL TARGET
  drop
  # shellcheck disable=SC2046
  /usr/bin/time -v -o "$tmp" $(cmd_for "$4" "$5") > /dev/null 2>&1 || true
  python3 "$here/timev.py" "$tmp" wall,user,sys,rss,read,exit "$1" "$2" "$3" "$4" >> "$raw"
  echo "$1 $2 round $3 $4: $(tail -1 "$raw" | cut -f5-10)" >&2
}

for i in $images; do
  img="$dir/$i.img"
  for place in file loop; do
    if [ "$place" = file ]; then
      target=$img
      tools=(e2fsck default direct)
    else
      loopdev=$(losetup -f --show -r --direct-io=on "$img")
      target=$loopdev
      tools=(e2fsck default buffered)
    fi
    for ((r = 1; r <= rounds; r++)); do
      for ((k = 0; k < ${#tools[@]}; k++)); do
        t=${tools[$(((k + r - 1) % ${#tools[@]}))]}
        run_one "$i" "$place" "$r" "$t" "$target"
      done
    done
    if [ "$place" = loop ]; then
      losetup -d "$loopdev"
      loopdev=""
    fi
  done
done

machine="$(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, kernel $(uname -r), images on $(df "$dir" | awk 'NR==2{print $1}')"
ver=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
python3 - "$raw" "$dev" "$out" "$machine" "$ver" "$rounds" <<'PY'
import sys, statistics
raw, devf, out, machine, ver, rounds = sys.argv[1:]
runs = [l.rstrip("\n").split("\t") for l in open(raw) if l.strip()]
dev = {p[0]: (float(p[1]), float(p[2])) for p in (l.split("\t") for l in open(devf) if l.strip())}
seq = dev.get("seq", (0, 0))[0]
names = {"e2fsck": "e2fsck -fn", "default": "ext4chk -n", "direct": "ext4chk -n --direct-io on",
         "buffered": "ext4chk -n --direct-io off"}
path = {("file", "default"): "page cache", ("file", "direct"): "O_DIRECT",
        ("loop", "default"): "O_DIRECT", ("loop", "buffered"): "page cache",
        ("file", "e2fsck"): "page cache", ("loop", "e2fsck"): "page cache"}
def med(sel, col):
    return statistics.median(float(r[col]) for r in sel)
L = ["<!-- cold -->", "## Cold reads: the page cache against O_DIRECT", "",
     f"`benches/cold.sh` (commit {ver}; {machine}; {rounds} rounds in rotated order, medians; "
     "the page cache dropped before every run). *file*: the image file; *loop*: the image behind a "
     "read-only loop device with `--direct-io=on`, standing in for a block device. "
     "ext4chk reads with O_DIRECT by default on block devices, through the page cache on image files.", "",
     "The device, measured in the same run with fio on a written 2 GiB file (O_DIRECT):", "",
     "| test | rate | IOPS |", "|---|---:|---:|"]
for k, label in (("seq", "sequential 1 MiB reads, queue depth 16"),
                 ("rand-qd1", "random 4 KiB reads, queue depth 1"),
                 ("rand-qd32", "random 4 KiB reads, queue depth 32")):
    if k in dev:
        L.append(f"| {label} | {dev[k][0] / 1e6:.0f} MB/s | {dev[k][1]:,.0f} |")
L += ["", "| image | place | command | reads through | wall s | user s | sys s | peak RSS MiB | read | read rate | share of sequential rate | e2fsck ÷ this |",
      "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
keys = []
for r in runs:
    if (r[0], r[1]) not in keys:
        keys.append((r[0], r[1]))
for img, place in keys:
    sel = [r for r in runs if r[0] == img and r[1] == place]
    base = med([r for r in sel if r[3] == "e2fsck"], 4)
    for tool in ("e2fsck", "default", "direct", "buffered"):
        s = [r for r in sel if r[3] == tool]
        if not s:
            continue
        w, u, y, rss, rd = (med(s, c) for c in (4, 5, 6, 7, 8))
        rate = rd / w if w > 0 else 0
        share = f"{rate / seq * 100:.0f}%" if seq else ""
        ratio = f"{base / w:.2f}" if tool != "e2fsck" else ""
        L.append(f"| {img} | {place} | {names[tool]} | {path[(place, tool)]} | {w:.2f} | {u:.2f} | {y:.2f} | "
                 f"{rss / 1024:.0f} | {rd / 1e9:.2f} GB | {rate / 1e6:.0f} MB/s | {share} | {ratio} |")
L += ["", "Raw runs (image, place, round, command, wall s, user s, sys s, peak RSS KiB, bytes read, exit):", "", "```"]
L += ["\t".join(r) for r in runs]
L += ["```", "<!-- /cold -->", ""]
text = "\n".join(L)
try:
    old = open(out).read()
except FileNotFoundError:
    old = ""
if "<!-- cold -->" in old:
    a = old.index("<!-- cold -->")
    b = old.index("<!-- /cold -->") + len("<!-- /cold -->\n") if "<!-- /cold -->" in old else len(old)
    new = old[:a] + text + old[b:]
else:
    new = old.rstrip("\n") + "\n\n" + text
open(out, "w").write(new)
print(f"wrote the Cold reads section of {out}", file=sys.stderr)
PY
