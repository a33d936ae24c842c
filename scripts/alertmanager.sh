#!/usr/bin/env bash
# Alertmanager's own programs for the end-to-end tests (tests/e2e/alertmanager.rs):
# `prometheus-alertmanager` (a real Alertmanager that forewarn's receiver feeds)
# and `amtool` (which manages forewarn's silences through /api/v2/silences),
# both from Debian's package prometheus-alertmanager.
#
#   scripts/alertmanager.sh install   apt-get install the package unless both programs are present
#   scripts/alertmanager.sh check     exit non-zero, naming what is missing
#
# Idempotent: a machine that has both programs is left alone. The package's
# own service is not used: the tests start their own Alertmanager on a
# loopback port with a throwaway config and storage directory.
set -euo pipefail

missing() {
  local m=()
  command -v amtool >/dev/null 2>&1 || m+=(amtool)
  command -v prometheus-alertmanager >/dev/null 2>&1 || m+=(prometheus-alertmanager)
  echo "${m[@]:-}"
}

case "${1:-}" in
  install)
    if [ -z "$(missing)" ]; then
      echo "== amtool and prometheus-alertmanager already installed"
      exit 0
    fi
    echo "== installing Debian's prometheus-alertmanager (missing: $(missing))"
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then
      command -v sudo >/dev/null || { echo "alertmanager.sh: run as root or install sudo" >&2; exit 1; }
      sudo=sudo
    fi
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq --no-install-recommends prometheus-alertmanager
    # The package may start its own service; the tests do not need it.
    if command -v systemctl >/dev/null && systemctl is-active --quiet prometheus-alertmanager 2>/dev/null; then
      $sudo systemctl stop prometheus-alertmanager || true
    fi
    [ -z "$(missing)" ] || { echo "alertmanager.sh: still missing: $(missing)" >&2; exit 1; }
    ;;
  check)
    if [ -n "$(missing)" ]; then
      echo "missing: $(missing) (run scripts/alertmanager.sh install)" >&2
      exit 1
    fi
    echo "== amtool and prometheus-alertmanager present"
    ;;
  *)
    echo "usage: $0 install|check" >&2
    exit 2
    ;;
esac
