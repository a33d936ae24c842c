#!/usr/bin/env bash
# Installs what the remote-write end-to-end test needs: Prometheus from
# Debian's `prometheus` package (the test starts its own on 127.0.0.1 with a
# throwaway config and storage; the packaged service is stopped and
# disabled so it does not hold port 9090 or scrape anything).
#
#   scripts/prometheus.sh install   # idempotent: skips when present
#   scripts/prometheus.sh check     # exit 1 if missing
set -euo pipefail

have() { command -v prometheus >/dev/null 2>&1 && prometheus --version >/dev/null 2>&1; }

case "${1:-install}" in
  install)
    if have; then
      echo "prometheus: $(prometheus --version 2>&1 | head -1)"
      exit 0
    fi
    if [ "$(id -u)" -ne 0 ]; then
      echo "prometheus is missing; run as root: scripts/prometheus.sh install" >&2
      exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    # Do not start the packaged service during installation.
    policy=/usr/sbin/policy-rc.d
    created_policy=0
    if [ ! -e "$policy" ]; then
      printf '#!/bin/sh\nexit 101\n' >"$policy"
      chmod +x "$policy"
      created_policy=1
    fi
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends prometheus
    [ "$created_policy" = 1 ] && rm -f "$policy"
    if command -v systemctl >/dev/null 2>&1; then
      systemctl disable --now prometheus prometheus-node-exporter >/dev/null 2>&1 || true
    fi
    have
    echo "prometheus: $(prometheus --version 2>&1 | head -1)"
    ;;
  check)
    have || { echo "prometheus is missing: run scripts/prometheus.sh install" >&2; exit 1; }
    ;;
  *)
    echo "usage: $0 install|check" >&2
    exit 2
    ;;
esac
