#!/usr/bin/env bash
# Throughput and latency through a real broker (docs/performance.md, issue 7):
# a simulated fleet is replayed into tansu at a paced rate while
# `forewarn serve` consumes it; prints the sustained ingest rate, the
# largest lag seen and the broker-to-decision latency histogram.
#
#   scripts/bench-kafka.sh [GPUS] [HOURS] [SPEED] [GROUP]
#
# SPEED is event time per wall second: 1,000 GPUs at 30 s intervals are
# 33.3 samples/s per unit, so SPEED 900 offers ~30,000 samples/s. GROUP is
# `forewarn replay --group`: rack (default, ~31 samples a message), host
# (8) or gpu (1); tansu's SQLite engine costs ~0.3 ms of CPU per record, so
# on 2 cores it cannot take 30,000 samples/s one host per record. Gives
# up when nothing more is consumed for 60 s (a dead broker). PARTITIONS
# (default 4) sets the topic's partition count.
set -euo pipefail
cd "$(dirname "$0")/.."
GPUS="${1:-1000}"; HOURS="${2:-2}"; SPEED="${3:-900}"; GROUP="${4:-rack}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/forewarn/target}"
cargo build --release -q -p detector
F="$CARGO_TARGET_DIR/release/forewarn"
W="$(mktemp -d /tmp/fw-bench-kafka.XXXXXX)"
PORT=$((20000 + RANDOM % 20000)); API=$((PORT + 1))
# The broker's SQLite file lives in memory when it can (/dev/shm): its
# fsyncs on this VM's disk vary run to run by more than the pipeline's
# cost, and the disk is the broker's concern, not forewarn's.
if [ -w /dev/shm ]; then B="$(mktemp -d /dev/shm/fw-tansu.XXXXXX)"; else B="$W/broker"; fi
# serve stops first so its final offset commit reaches the broker (with
# the broker gone it waits 5 s for an answer, then stops anyway: the
# checkpoint holds the offsets).
stop_all() {
  if [ -n "${SVC:-}" ]; then
    kill "$SVC" 2>/dev/null || true
    for _ in $(seq 1 60); do kill -0 "$SVC" 2>/dev/null || break; sleep 0.5; done
    kill -9 "$SVC" 2>/dev/null || true
  fi
  scripts/broker.sh stop "$B" || true
  [ "$B" = "$W/broker" ] || rm -rf "$B"
}
trap stop_all EXIT
scripts/broker.sh start "$PORT" "$B" >/dev/null
"$(scripts/broker.sh path)" topic create telemetry --partitions "${PARTITIONS:-4}" --broker "tcp://127.0.0.1:$PORT" >/dev/null
"$F" simulate --gpus "$GPUS" --hours "$HOURS" --seed 1 --format jsonl --out "$W/sim" 2>&1 | tail -1
TOTAL=$(wc -l <"$W/sim/telemetry.jsonl")
cat >"$W/forewarn.toml" <<TOML
[source]
type = "kafka"
brokers = "127.0.0.1:$PORT"
topics = ["telemetry"]
[checkpoint]
dir = "$W/ckpt"
interval_s = 10
[export]
dir = "$W/export"
[api]
listen = "127.0.0.1:$API"
TOML
# Extra consumer options for experiments, e.g. FETCH_OPTIONS='"fetch.wait.max.ms" = "25"'.
if [ -n "${FETCH_OPTIONS:-}" ]; then printf '[source.options]\n%s\n' "$FETCH_OPTIONS" >>"$W/forewarn.toml"; fi
(cd "$W" && FOREWARN_LOG=warn exec "$F" serve --config forewarn.toml 2>"$W/serve.log") & SVC=$!
until curl -sf "127.0.0.1:$API/healthz" >/dev/null; do sleep 0.2; done
start=$(date +%s.%N)
/usr/bin/time -f "replay CPU user %U s, sys %S s" "$F" replay --input "$W/sim/telemetry.jsonl" --brokers "127.0.0.1:$PORT" --speed "$SPEED" --group "$GROUP" ${REPLAY_OPTIONS:-} >"$W/replay.log" 2>&1 &
REPLAY=$!
maxlag=0; last=0; stalled=0
while :; do
  m=$(curl -sf "127.0.0.1:$API/metrics")
  n=$(echo "$m" | awk '/^forewarn_samples_ingested_total /{print $2}')
  lag=$(echo "$m" | awk '/^forewarn_consumer_lag\{/{s+=$2} END{print s+0}')
  [ "$lag" -gt "$maxlag" ] && maxlag=$lag
  if [ "${n%.*}" -ge "$TOTAL" ]; then break; fi
  if [ "${n%.*}" -gt "$last" ]; then last=${n%.*}; stalled=0; else stalled=$((stalled + 1)); fi
  if [ "$stalled" -ge 120 ]; then
    echo "stalled: $last of $TOTAL samples consumed, nothing more for 60 s (broker log: $B/tansu.log)"
    kill $REPLAY 2>/dev/null || true
    break
  fi
  sleep 0.5
done
end=$(date +%s.%N)
wait $REPLAY || true
tail -2 "$W/replay.log"
secs=$(echo "$end - $start" | bc -l)
echo "consumed $TOTAL samples in ${secs}s: $(echo "$TOTAL / $secs" | bc) samples/s; max lag seen $maxlag messages"
curl -sf "127.0.0.1:$API/metrics" | grep -E "forewarn_broker_to_decision_seconds_(bucket|count)|^forewarn_source_pauses_total"
ps -o rss=,cputime= -p $SVC | awk '{print "serve RSS " $1/1024 " MB, CPU " $2}'
[ -f "$B/tansu.pid" ] && ps -o cputime= -p "$(cat "$B/tansu.pid")" | awk '{print "tansu CPU " $1}' || true
