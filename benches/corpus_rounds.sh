#!/usr/bin/env bash
# How many fixing rounds and checks a repair takes on each image of the
# e2fsprogs corpus, against e2fsck -fy's runs (one, plus one for each
# "Restarting e2fsck from the beginning"), with why a round stopped early.
#
#   benches/corpus_rounds.sh [BINARY] > rounds.tsv
#
# Columns: image, e2fsck -fy exit, e2fsck runs, ext4chk -y exit, fixing
# rounds (rounds that fixed something), checks, stop reasons. The last
# lines sum it up.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$root/target/release/ext4chk}
corpus=${EXT4CHK_CORPUS:-$root/../shared/corpus/e2fsprogs}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
more=0 changed=0 checks=0
for d in "$corpus"/*/; do
  name=$(basename "$d")
  [ -f "$d/image.gz" ] || continue
  gunzip -c "$d/image.gz" > "$work/a.img" 2>/dev/null || continue
  cp "$work/a.img" "$work/b.img"
  ec=0
  E2FSCK_CONFIG=/dev/null timeout -s KILL 60 e2fsck -fy "$work/b.img" > "$work/e.txt" 2>&1 || ec=$?
  runs=$(( $(grep -c "Restarting e2fsck" "$work/e.txt" || true) + 1 ))
  xc=0
  E2FSCK_CONFIG=/dev/null timeout -s KILL 60 "$bin" -y --format json "$work/a.img" > "$work/j.json" 2>/dev/null || xc=$?
  read -r rounds nchecks why < <(jq -r '[(.repair.rounds // [] | map(select(.fixed > 0)) | length),
      (.repair.check_seconds // [] | length),
      ([.repair.rounds[]?.stopped_early | select(. != null)] | join("; ") | if . == "" then "-" else . end)] | @tsv' "$work/j.json" 2>/dev/null || echo "0 0 -")
  printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\n" "$name" "$ec" "$runs" "$xc" "$rounds" "$nchecks" "$why"
  if [ "$ec" -ne 0 ]; then
    changed=$((changed + 1))
    [ "$rounds" -gt "$runs" ] && more=$((more + 1))
  fi
  checks=$((checks + nchecks))
done
echo "# images e2fsck -fy changes: $changed; of them, repaired in more fixing rounds than e2fsck's runs: $more; checks in all: $checks"
