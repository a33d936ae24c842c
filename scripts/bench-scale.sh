#!/usr/bin/env bash
# One instance against several on the same input (issue #31,
# docs/performance.md): a simulated fleet is produced into tansu first
# (4 partitions, keyed by rack), then for each instance count N a fresh
# consumer group of N `forewarn serve` instances (shared partition store,
# the fleet topic on) reads it all. Prints per run the wall time from the
# first sample taken to the last, samples/s, each instance's share of the
# samples and its CPU time, and how many samples were taken more than once
# (the sum over instances minus the input).
#
#   scripts/bench-scale.sh [GPUS] [HOURS] [COUNTS]      e.g. 1000 6 "1 2"
#
# BIN (default: the dev build in CARGO_TARGET_DIR) is the binary measured.
set -euo pipefail
cd "$(dirname "$0")/.."
GPUS="${1:-1000}"; HOURS="${2:-6}"; COUNTS="${3:-1 2}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/forewarn/target}"
F="${BIN:-$CARGO_TARGET_DIR/debug/forewarn}"
[ -x "$F" ] || { echo "bench-scale.sh: $F missing (cargo build -p detector --bin forewarn, or BIN=...)" >&2; exit 1; }
W="$(mktemp -d /tmp/fw-bench-scale.XXXXXX)"
PORT=$((20000 + RANDOM % 20000))
if [ -w /dev/shm ]; then B="$(mktemp -d /dev/shm/fw-tansu.XXXXXX)"; else B="$W/broker"; fi
PIDS=()
stop_instances() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do
    for _ in $(seq 1 60); do kill -0 "$p" 2>/dev/null || break; sleep 0.5; done
    kill -9 "$p" 2>/dev/null || true
  done
  PIDS=()
}
cleanup() {
  stop_instances
  scripts/broker.sh stop "$B" || true
  [ "$B" = "$W/broker" ] || rm -rf "$B"
}
trap cleanup EXIT
scripts/broker.sh start "$PORT" "$B" >/dev/null
T="$(scripts/broker.sh path)"
"$T" topic create telemetry --partitions 4 --broker "tcp://127.0.0.1:$PORT" >/dev/null
"$F" simulate --gpus "$GPUS" --hours "$HOURS" --seed 1 --format jsonl --out "$W/sim" 2>&1 | tail -1
TOTAL=$(wc -l <"$W/sim/telemetry.jsonl")
"$F" replay --input "$W/sim/telemetry.jsonl" --brokers "127.0.0.1:$PORT" --topic telemetry --speed 0 >"$W/replay.log" 2>&1
tail -1 "$W/replay.log"

for n in $COUNTS; do
  fleet="fleet-$n"
  "$T" topic create "$fleet" --partitions 1 --broker "tcp://127.0.0.1:$PORT" >/dev/null
  apis=()
  for i in $(seq 1 "$n"); do
    d="$W/run$n/i$i"; mkdir -p "$d"
    api=$((PORT + 100 * n + i))
    cat >"$d/forewarn.toml" <<TOML
[source]
type = "kafka"
brokers = "127.0.0.1:$PORT"
topics = ["telemetry"]
group_id = "bench-$n"
fleet_topic = "$fleet"
[checkpoint]
dir = "$d/ckpt"
interval = "10s"
store = "$W/run$n/store"
[api]
listen = "127.0.0.1:$api"
TOML
    (cd "$d" && FOREWARN_LOG=info exec "$F" serve --config forewarn.toml 2>"$d/serve.log") &
    PIDS+=($!)
    apis+=("$api")
  done
  start=""; stalled=0; last=0
  while :; do
    sum=0; shares=""
    for api in "${apis[@]}"; do
      v=$(curl -sf "127.0.0.1:$api/metrics" | awk '/^forewarn_samples_ingested_total /{print $2}')
      v=${v:-0}; v=${v%.*}
      sum=$((sum + v)); shares="$shares $v"
    done
    now=$(date +%s.%N)
    if [ -z "$start" ] && [ "$sum" -gt 0 ]; then start=$now; fi
    if [ "$sum" -ge "$TOTAL" ]; then
      # Nothing more may arrive: wait for the lag to reach 0 everywhere.
      lag=0
      for api in "${apis[@]}"; do
        l=$(curl -sf "127.0.0.1:$api/metrics" | awk '/^forewarn_consumer_lag\{/{s+=$2} END{print s+0}')
        lag=$((lag + l))
      done
      [ "$lag" -eq 0 ] && break
    fi
    if [ "$sum" -gt "$last" ]; then last=$sum; stalled=0; else stalled=$((stalled + 1)); fi
    if [ "$stalled" -ge 240 ]; then echo "stalled at $sum of $TOTAL samples (logs in $W/run$n)"; break; fi
    sleep 0.25
  done
  end=$(date +%s.%N)
  secs=$(echo "$end - ${start:-$end}" | bc -l)
  cpu=""
  for p in "${PIDS[@]}"; do cpu="$cpu $(ps -o cputime= -p "$p" | tr -d ' ')"; done
  rate=$(echo "$TOTAL / ($secs + 0.000001)" | bc)
  printf '%d instance(s): %d samples in %.1f s = %d samples/s; taken per instance:%s; taken twice: %d; CPU per instance:%s\n' \
    "$n" "$TOTAL" "$secs" "$rate" "$shares" "$((sum - TOTAL))" "$cpu"
  stop_instances
done
ps -o cputime= -p "$(cat "$B/tansu.pid")" | awk '{print "tansu CPU " $1}' || true
rm -rf "$W"
