#!/usr/bin/env bash
# Interleaved A/B of two `forewarn` builds on one `backtest` input: runs each
# binary ROUNDS times, alternating, and prints per run the throughput, CPU
# time (task-clock), page faults, user / system seconds and peak RSS, then
# the mean throughput and summed CPU time per binary, and whether the two
# alert files agree. This machine's speed drifts by more than most changes'
# effect, so single runs decide nothing; pause other builds meanwhile.
# Needs perf (Debian's linux-perf) and GNU time.
# Usage: scripts/backtest-ab.sh ROUNDS BIN_A BIN_B INPUT [backtest args]
set -euo pipefail
rounds=$1 a=$2 b=$3 input=$4
shift 4
dir=$(mktemp -d)
for i in $(seq "$rounds"); do
  for side in a b; do
    bin=${!side}
    /usr/bin/time -f "%U %S %M" -o "$dir/time" \
      perf stat -e page-faults,task-clock -x, -o "$dir/stat" \
      "$bin" backtest --input "$input" --alerts-out "$dir/alerts.$side.jsonl" "$@" > "$dir/log" 2>&1
    rate=$(grep -o '([0-9]* samples/s)' "$dir/log" | tr -dc '0-9')
    task=$(grep task-clock "$dir/stat" | cut -d, -f1)
    faults=$(grep page-faults "$dir/stat" | cut -d, -f1)
    read -r user sys rss < <(tail -1 "$dir/time")
    echo "$side $i $rate samples/s, cpu ${task%.*} ms, $faults faults, user $user s, sys $sys s, rss $rss KB" | tee -a "$dir/runs"
  done
done
for side in a b; do
  grep "^$side " "$dir/runs" | awk -v bin="${!side}" '{r+=$3; c+=$6; n++} END {printf "%s: mean %.0f samples/s, cpu %.1f s over %d runs\n", bin, r/n, c/1000, n}'
done
if cmp -s "$dir/alerts.a.jsonl" "$dir/alerts.b.jsonl"; then echo "alert files: identical"; else echo "alert files: differ (kept in $dir)"; exit 0; fi
rm -rf "$dir"
