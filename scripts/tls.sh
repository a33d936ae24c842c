#!/usr/bin/env bash
# The TLS pieces of the secure-Kafka end-to-end test (tests/e2e/kafka_tls.rs):
# tansu 0.6 parses --cert but never serves TLS, so Debian's stunnel4
# terminates TLS in front of it; openssl is the CLI the test makes its
# throwaway CA and 127.0.0.1 server certificate with. forewarn itself needs
# neither: its librdkafka is built with a vendored OpenSSL (perl + make).
#
#   scripts/tls.sh install    apt-get stunnel4 and openssl when missing (idempotent; root or sudo)
#   scripts/tls.sh check      exit 1 naming what is missing
set -euo pipefail

missing() {
  local m=()
  command -v stunnel4 >/dev/null 2>&1 || command -v stunnel >/dev/null 2>&1 || m+=(stunnel4)
  command -v openssl >/dev/null 2>&1 || m+=(openssl)
  echo "${m[@]:-}"
}

case "${1:-}" in
  install)
    need="$(missing)"
    if [ -z "$need" ]; then
      echo "== stunnel4 and openssl already installed"
      exit 0
    fi
    echo "== installing $need (Debian packages) for the TLS end-to-end test"
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    export DEBIAN_FRONTEND=noninteractive
    # shellcheck disable=SC2086
    $SUDO apt-get install -y --no-install-recommends $need \
      || { $SUDO apt-get update && $SUDO apt-get install -y --no-install-recommends $need; }
    ;;
  check)
    need="$(missing)"
    if [ -n "$need" ]; then
      echo "tls.sh: missing $need: run scripts/tls.sh install" >&2
      exit 1
    fi
    ;;
  *)
    sed -n '2,10p' "$0"
    exit 2
    ;;
esac
