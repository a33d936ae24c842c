#!/usr/bin/env bash
# Coverage-guided fuzzing of the decoders, config parsers and checkpoint
# restore (fuzz/, docs/fuzzing.md), with cargo-fuzz and libFuzzer on the
# stable toolchain (sanitizers off: `-s none`).
#
#   scripts/fuzz.sh                  every target, 60 s each
#   scripts/fuzz.sh TARGET [SECONDS] one target (default 600 s)
#   scripts/fuzz.sh all SECONDS      every target, SECONDS each
#   scripts/fuzz.sh --replay         every target over its committed corpus,
#                                    no fuzzing (CI: a regression check)
#   scripts/fuzz.sh --list           the targets
#
# Installs cargo-fuzz when missing. Instrumented builds have their own
# target dir; new corpus entries go to a work dir outside the clone, so the
# committed corpus (fuzz/corpus/<target>/) changes only by hand (cmin).
#   FUZZ_TARGET_DIR   (default ~/.cache/forewarn/fuzz-target)
#   FUZZ_WORK_DIR     (default ~/.cache/forewarn/fuzz-corpus)
#   FOREWARN_TOOLS    (default ~/.cache/forewarn/tools)
#   FUZZ_NICE         (default 10: the fuzzer yields to builds)
set -euo pipefail
cd "$(dirname "$0")/.."

export FOREWARN_TOOLS="${FOREWARN_TOOLS:-$HOME/.cache/forewarn/tools}"
export FUZZ_TARGET_DIR="${FUZZ_TARGET_DIR:-$HOME/.cache/forewarn/fuzz-target}"
export FUZZ_WORK_DIR="${FUZZ_WORK_DIR:-$HOME/.cache/forewarn/fuzz-corpus}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
export PATH="$FOREWARN_TOOLS/bin:$PATH"
NICE="${FUZZ_NICE:-10}"
CARGO_FUZZ_VERSION=0.13.2

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "== installing cargo-fuzz $CARGO_FUZZ_VERSION into $FOREWARN_TOOLS"
    cargo install --locked --root "$FOREWARN_TOOLS" cargo-fuzz --version "$CARGO_FUZZ_VERSION"
fi

targets() { cargo fuzz list --fuzz-dir fuzz; }

# libFuzzer options shared by every run: a hang is any input over 10 s, a
# huge allocation anything over 2 GB at once or in total.
LIBFUZZER_OPTS=(-timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 -max_len=65536)

replay() {
    echo "== cargo fuzz build (all targets)"
    nice -n "$NICE" cargo fuzz build --fuzz-dir fuzz -s none --target-dir "$FUZZ_TARGET_DIR"
    local t n
    for t in $(targets); do
        n=$(find "fuzz/corpus/$t" -type f | wc -l)
        echo "== replay $t ($n inputs)"
        cargo fuzz run --fuzz-dir fuzz -s none --target-dir "$FUZZ_TARGET_DIR" \
            "$t" "fuzz/corpus/$t" -- -runs=0 "${LIBFUZZER_OPTS[@]}"
    done
    echo "fuzz replay: all targets passed"
}

run() {
    local t="$1" secs="$2"
    mkdir -p "$FUZZ_WORK_DIR/$t"
    echo "== fuzz $t for ${secs}s (new inputs in $FUZZ_WORK_DIR/$t)"
    nice -n "$NICE" cargo fuzz run --fuzz-dir fuzz -s none --target-dir "$FUZZ_TARGET_DIR" \
        "$t" "$FUZZ_WORK_DIR/$t" "fuzz/corpus/$t" -- \
        -max_total_time="$secs" -print_final_stats=1 "${LIBFUZZER_OPTS[@]}"
}

case "${1:-all}" in
    --replay) replay ;;
    --list) targets ;;
    -h | --help) sed -n '2,20p' "$0" ;;
    all)
        secs="${2:-60}"
        for t in $(targets); do run "$t" "$secs"; done
        ;;
    *) run "$1" "${2:-600}" ;;
esac
