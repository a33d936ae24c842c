#!/usr/bin/env bash
# The test command of the README, also what CI runs (.ci/run).
#
# Works on a fresh machine: installs what the end-to-end tests need (the tansu
# Kafka-compatible broker, built once and cached by path), then runs every
# test of the workspace. Build outputs and tools live outside the clone so
# repeat runs skip rebuilds:
#   CARGO_TARGET_DIR  (default ~/.cache/forewarn/target)
#   FOREWARN_TOOLS    (default ~/.cache/forewarn/tools)
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/forewarn/target}"
export FOREWARN_TOOLS="${FOREWARN_TOOLS:-$HOME/.cache/forewarn/tools}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

# The Kafka end-to-end test runs against tansu; here it must not skip.
scripts/broker.sh install
# TLS in front of the broker for the secure-Kafka test (stunnel, openssl).
scripts/tls.sh install
# Alertmanager and amtool for the silences and forwarding tests.
scripts/alertmanager.sh install
# Prometheus for the remote-write and deploy-rule tests.
scripts/prometheus.sh install
export FOREWARN_REQUIRE_BROKER=1

# The end-to-end tests run the real `forewarn` binary. `cargo test` builds
# a package's binaries only for that package's own integration tests, and
# they live in another package (tests/), so build it first: otherwise a
# fresh machine has none and a warm one tests a stale one.
echo "== cargo build -p detector --bin forewarn"
cargo build -p detector --bin forewarn

# The alerting rules and dashboard in deploy/ through promtool (installs
# Debian's prometheus package for it when missing).
scripts/deploy-check.sh

echo "== cargo test --workspace"
cargo test --workspace --no-fail-fast

# Every fuzz target over its committed corpus, no fuzzing: the inputs that
# once crashed or hung stay fixed (docs/fuzzing.md). Installs cargo-fuzz
# and builds the instrumented targets on first run (their own target dir).
# FOREWARN_FUZZ_REPLAY=0 skips it.
if [ "${FOREWARN_FUZZ_REPLAY:-1}" != 0 ]; then
    scripts/fuzz.sh --replay
fi

# The fleet map in a real browser (installs chromium and playwright-core
# on first run; screenshots in out/browser).
scripts/browser.sh test
