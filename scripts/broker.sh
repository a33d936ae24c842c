#!/usr/bin/env bash
# The Kafka-compatible broker of the end-to-end tests: tansu 0.6.0 from
# crates.io, built with the SQLite storage engine (its memory:// engine
# skips messages when a consumer resumes from an offset; the default build
# has no storage). Installed once under $FOREWARN_TOOLS and reused by path.
#
#   scripts/broker.sh install            build tansu if $FOREWARN_TOOLS/bin/tansu is missing (~10 min)
#   scripts/broker.sh start PORT DIR     start on 127.0.0.1:PORT with data in DIR; PID in DIR/tansu.pid
#                                        ($FOREWARN_BROKER_STORAGE overrides the storage URL, e.g. memory://)
#   scripts/broker.sh stop DIR           stop the broker started with DIR
#   scripts/broker.sh path               print the binary's path
#
# The end-to-end tests start and stop their own brokers (by PID) from the
# same binary; start/stop here are for trying forewarn by hand.
set -euo pipefail

TOOLS="${FOREWARN_TOOLS:-$HOME/.cache/forewarn/tools}"
TANSU="$TOOLS/bin/tansu"
VERSION=0.6.0

case "${1:-}" in
  install)
    if [ -x "$TANSU" ] && grep -q "tansu $VERSION" "$TOOLS/.crates.toml" 2>/dev/null; then
      echo "== tansu $VERSION already installed at $TANSU"
      exit 0
    fi
    echo "== installing tansu $VERSION (sqlite storage) into $TOOLS; this takes ~15 minutes once"
    command -v cc >/dev/null || { echo "broker.sh: a C compiler (gcc) is needed to build tansu" >&2; exit 1; }
    # opt-level 1: a test broker; it builds faster than with the
    # default release profile (opt-level 3) on a 2-core machine.
    CARGO_PROFILE_RELEASE_OPT_LEVEL=1 cargo install tansu --version "=$VERSION" --locked \
      --no-default-features --features dynostore,libsql \
      --root "$TOOLS" --target-dir "$TOOLS/../tansu-target"
    ;;
  start)
    port="${2:?usage: broker.sh start PORT DIR}"
    dir="${3:?usage: broker.sh start PORT DIR}"
    mkdir -p "$dir"
    # tansu reads the path of a sqlite:// URL relative to its working directory.
    (cd "$dir" && exec "$TANSU" broker \
      --listener-url "tcp://127.0.0.1:$port" \
      --advertised-listener-url "tcp://127.0.0.1:$port" \
      --storage-engine "${FOREWARN_BROKER_STORAGE:-sqlite://tansu.db}" >tansu.log 2>&1) &
    echo $! >"$dir/tansu.pid"
    for _ in $(seq 1 100); do
      if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        echo "tansu listening on 127.0.0.1:$port (pid $(cat "$dir/tansu.pid"))"
        exit 0
      fi
      sleep 0.1
    done
    echo "broker.sh: tansu did not start; see $dir/tansu.log" >&2
    exit 1
    ;;
  stop)
    dir="${2:?usage: broker.sh stop DIR}"
    if [ -f "$dir/tansu.pid" ]; then
      kill "$(cat "$dir/tansu.pid")" 2>/dev/null || true
      rm -f "$dir/tansu.pid"
    fi
    ;;
  path)
    echo "$TANSU"
    ;;
  *)
    sed -n '2,14p' "$0"
    exit 2
    ;;
esac
