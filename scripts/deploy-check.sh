#!/usr/bin/env bash
# Checks what deploy/ ships for running forewarn: the Prometheus alerting
# rules (promtool check rules, and promtool test rules: one test per rule)
# and the Grafana dashboard's queries (each one compiled by promtool as a
# recording rule, so a PromQL typo fails here, not on an operator's screen).
# Installs Debian's prometheus package (for promtool) when it is missing.
# The Rust test detector/src/metrics/deploy_tests.rs checks that every
# metric these files name is one forewarn exports, and the dashboard's shape.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v promtool >/dev/null; then
  if [ "$(id -u)" != 0 ]; then
    echo "promtool missing and not root: apt-get install prometheus" >&2
    exit 1
  fi
  echo "== installing prometheus (apt-get) for promtool"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi

echo "== promtool check rules deploy/prometheus/forewarn-rules.yml"
promtool check rules deploy/prometheus/forewarn-rules.yml
echo "== promtool test rules deploy/prometheus/forewarn-rules.test.yml"
(cd deploy/prometheus && promtool test rules forewarn-rules.test.yml)

echo "== the dashboard's queries through promtool"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 - deploy/grafana/forewarn.json "$tmp/dashboard-rules.yml" <<'PY'
import json, sys
dash = json.load(open(sys.argv[1]))
out = ["groups:", "  - name: dashboard", "    rules:"]
n = 0
for p in dash["panels"]:
    for t in p.get("targets", []):
        n += 1
        # Grafana's variables become what they stand for.
        expr = t["expr"].replace("$instance", ".*")
        out.append(f"      - record: dashboard:panel{p['id']}:{t['refId']}")
        out.append("        expr: " + json.dumps(expr))
open(sys.argv[2], "w").write("\n".join(out) + "\n")
print(f"{n} queries from {len(dash['panels'])} panels")
PY
promtool check rules "$tmp/dashboard-rules.yml"
