#!/usr/bin/env bash
# The fleet map's browser test: Debian's chromium driven headless by
# playwright-core against the real `forewarn serve` (tests/browser/).
#
#   scripts/browser.sh install   apt-get chromium if missing; npm ci
#                                playwright-core into $FOREWARN_TOOLS/node
#   scripts/browser.sh test      install, build forewarn, run the test (CI)
#   scripts/browser.sh bench     install, build --release, 100,000-GPU timings
#
# Screenshots go to $FOREWARN_ARTIFACTS (default out/browser, gitignored).
# Everything listens on 127.0.0.1 only.
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/forewarn/target}"
export FOREWARN_TOOLS="${FOREWARN_TOOLS:-$HOME/.cache/forewarn/tools}"
export FOREWARN_ARTIFACTS="${FOREWARN_ARTIFACTS:-$PWD/out/browser}"
export CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"
NODE_DIR="$FOREWARN_TOOLS/node"

install() {
  if [ ! -x "$CHROMIUM" ]; then
    echo "== installing chromium (apt-get)"
    if [ "$(id -u)" -ne 0 ]; then
      echo "chromium missing at $CHROMIUM and not root: apt-get install chromium" >&2
      exit 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
  fi
  # Reinstall only when the lock file changed.
  mkdir -p "$NODE_DIR"
  if ! cmp -s tests/browser/package-lock.json "$NODE_DIR/package-lock.json" \
    || [ ! -d "$NODE_DIR/node_modules/playwright-core" ]; then
    echo "== installing playwright-core (npm ci) into $NODE_DIR"
    cp tests/browser/package.json tests/browser/package-lock.json "$NODE_DIR/"
    (cd "$NODE_DIR" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
  fi
}

run() {
  local mode="$1" profile="$2"
  export NODE_PATH="$NODE_DIR/node_modules"
  export FOREWARN_BIN="$CARGO_TARGET_DIR/$profile/forewarn"
  # Playwright must not try to download its own browsers.
  export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
  echo "== browser $mode: $FOREWARN_BIN, $CHROMIUM"
  node tests/browser/map.test.js "$mode"
}

case "${1:-test}" in
  install) install ;;
  test)
    install
    cargo build -p detector --bin forewarn
    run test debug
    ;;
  bench)
    install
    cargo build -p detector --bin forewarn --release
    run bench release
    ;;
  *)
    echo "usage: $0 install|test|bench" >&2
    exit 2
    ;;
esac
