#!/usr/bin/env bash
# The test command of the README, also what CI runs (.ci/run).
#
# Works on a fresh machine: installs what the end-to-end tests need (the tansu
# Kafka-compatible broker, built once and cached by path; moto's S3 server in
# a virtualenv), then runs every
# test of the workspace. Build outputs and tools live outside the clone so
# repeat runs skip rebuilds:
#   CARGO_TARGET_DIR  (default ~/.cache/forewarn/target)
#   FOREWARN_TOOLS    (default ~/.cache/forewarn/tools)
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/forewarn/target}"
export FOREWARN_TOOLS="${FOREWARN_TOOLS:-$HOME/.cache/forewarn/tools}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

# What a fresh machine may lack beyond the Rust toolchain: a C toolchain,
# perl, make and pkg-config (librdkafka and tansu's SQLite build from source),
# OpenSSL's headers (librdkafka's TLS links the system's),
# node and npm (the browser test's playwright-core).
missing=()
for tool in cc make perl pkg-config; do command -v "$tool" >/dev/null || missing+=(build-essential perl pkg-config); done
pkg-config --exists openssl 2>/dev/null || missing+=(libssl-dev pkg-config)
command -v node >/dev/null && command -v npm >/dev/null || missing+=(nodejs npm)
if [ "${#missing[@]}" -gt 0 ]; then
    echo "== installing ${missing[*]} (apt-get)"
    [ "$(id -u)" -eq 0 ] || { echo "test.sh: missing ${missing[*]}; run as root or install them" >&2; exit 1; }
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(printf '%s\n' "${missing[@]}" | sort -u) >/dev/null
fi

# The Kafka end-to-end test runs against tansu; here it must not skip. On a
# fresh machine its build (~15 min) runs beside the workspace's: both have
# long single-threaded stretches (big crates, linking) that leave a core idle.
broker_log="$(mktemp)"
scripts/broker.sh install >"$broker_log" 2>&1 &
broker_pid=$!
# TLS in front of the broker for the secure-Kafka test (stunnel, openssl).
scripts/tls.sh install
# Alertmanager and amtool for the silences and forwarding tests.
scripts/alertmanager.sh install
# Prometheus for the remote-write and deploy-rule tests.
scripts/prometheus.sh install
# moto's S3 server (pip, ~15 s once) for the partition store on object
# storage (tests/e2e/s3_store.rs).
scripts/s3.sh install
export FOREWARN_REQUIRE_BROKER=1 FOREWARN_REQUIRE_S3=1

# The end-to-end tests run the real `forewarn` binary. `cargo test` builds
# a package's binaries only for that package's own integration tests, and
# they live in another package (tests/), so build it first: otherwise a
# fresh machine has none and a warm one tests a stale one.
echo "== cargo build -p detector --bin forewarn"
cargo build -p detector --bin forewarn

# The alerting rules and dashboard in deploy/ through promtool (installs
# Debian's prometheus package for it when missing).
scripts/deploy-check.sh
# The systemd unit (systemd-analyze verify / security) and the Helm chart
# (helm lint and template, Kubernetes schemas): docs/deploy.md.
scripts/package-check.sh

echo "== waiting for the broker's install"
if ! wait "$broker_pid"; then
    cat "$broker_log" >&2
    echo "test.sh: installing the broker failed" >&2
    exit 1
fi
tail -n 3 "$broker_log"
rm -f "$broker_log"

echo "== cargo test --workspace"
cargo test --workspace --no-fail-fast

# The fuzz corpus is replayed by `cargo test` above (tests/fuzz_replay.rs:
# every committed input through its target's body, no instrumented build).
# FOREWARN_FUZZ_REPLAY=1 also replays it under libFuzzer (installs cargo-fuzz
# and builds the instrumented targets: several minutes on a fresh machine).
if [ "${FOREWARN_FUZZ_REPLAY:-0}" = 1 ]; then
    scripts/fuzz.sh --replay
fi

# The fleet map in a real browser (installs chromium and playwright-core
# on first run; screenshots in out/browser).
scripts/browser.sh test
