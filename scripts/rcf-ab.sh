#!/usr/bin/env bash
# Interleaved A/B of two builds of models/examples/rcf_throughput: runs each
# binary ROUNDS times, alternating, and prints the fastest and the median
# CPU time per call of the score and the update+score phases, and the CPU
# steal (from /proc/stat) over the whole run. This machine's speed drifts by
# more than most changes' effect, so single runs decide nothing.
# Usage: scripts/rcf-ab.sh ROUNDS BIN_A BIN_B [rcf_throughput args, default 2 4 20 50000]
set -euo pipefail
rounds=$1 a=$2 b=$3
shift 3
args=("$@")
[ ${#args[@]} -eq 0 ] && args=(2 4 20 50000)
steal() { awk '/^cpu /{print $9, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat; }
s0=$(steal)
out=$(mktemp)
for _ in $(seq "$rounds"); do
  for bin in "$a" "$b"; do
    echo "$bin $("$bin" "${args[@]}")" >> "$out"
  done
done
s1=$(steal)
# Prints "min median" of a column of numbers.
min_median() { sort -n | awk '{v[NR]=$1} END {printf "min %.2f median %.2f", v[1], v[int((NR+1)/2)]}'; }
for bin in "$a" "$b"; do
  rows=$(grep "^$bin " "$out" | sed -E 's/.*score ([0-9.]+) us, update\+score ([0-9.]+) us.*/\1 \2/')
  echo "$bin: score $(cut -d' ' -f1 <<< "$rows" | min_median) | update+score $(cut -d' ' -f2 <<< "$rows" | min_median) us ($(wc -l <<< "$rows") runs)"
done
grep -m1 "^$b " "$out" | sed -E 's/.*(heap [0-9]+ bytes.*)/\1/'
echo "$s0 $s1" | awk '{printf "steal %.1f %%\n", ($3-$1)/($4-$2)*100}'
rm -f "$out"
