#!/usr/bin/env bash
# Fails when the `detector` library has an import cycle between its modules
# (issue 25: the service's shared state used to be a circle). Installs
# cargo-modules into $FOREWARN_TOOLS (default ~/.cache/forewarn/tools) the
# first time; `cargo install --locked` builds it from crates.io.
#
#   scripts/check-cycles.sh            # check the detector lib
#   scripts/check-cycles.sh --graph    # print the module graph instead
set -euo pipefail

cd "$(dirname "$0")/.."
tools="${FOREWARN_TOOLS:-$HOME/.cache/forewarn/tools}"
version="${CARGO_MODULES_VERSION:-0.27.0}"
bin="$tools/bin/cargo-modules"

if [ ! -x "$bin" ] || ! "$bin" --version 2>/dev/null | grep -q "$version"; then
    echo "installing cargo-modules $version into $tools" >&2
    cargo install --locked --root "$tools" --version "$version" cargo-modules >&2
fi
export PATH="$tools/bin:$PATH"

# Only `use` edges between modules: functions, types and traits are left
# out, so an item's uses count for the module that holds it; `owns` edges
# (a parent declaring its child) are not dependencies. cargo-modules'
# own `--acyclic` does not look at the collapsed module graph, so the
# edges go through tsort(1), which fails on a loop and names it.
args=(dependencies --package detector --lib --no-externs --no-sysroot --no-owns --no-fns --no-types --no-traits)

graph="$(mktemp)"
trap 'rm -f "$graph" "$graph.edges" "$graph.loops"' EXIT
cargo modules "${args[@]}" >"$graph"
sed -n 's/^ *"\([^"]*\)" -> "\([^"]*\)" \[label="uses".*/\1 \2/p' "$graph" | sort -u >"$graph.edges"

if [ "${1:-}" = "--graph" ]; then
    cat "$graph.edges"
    exit 0
fi

if tsort "$graph.edges" >/dev/null 2>"$graph.loops"; then
    echo "detector: no import cycle between modules ($(wc -l <"$graph.edges") use edges)"
else
    cat "$graph.loops" >&2
    echo "detector: import cycle found (the modules tsort lists above)" >&2
    exit 1
fi
