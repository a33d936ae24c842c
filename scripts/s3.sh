#!/usr/bin/env bash
# The S3-compatible server of the end-to-end tests of the partition
# checkpoint store on object storage (tests/e2e/s3_store.rs): moto's server
# from PyPI, which honours S3's conditional writes (If-None-Match /
# If-Match) that the store's partition leases use. Only its S3 backend and
# the server's own needs (`moto[s3]`, flask, flask-cors: half the size and
# time of `moto[server]`, which brings every AWS service's). Installed once
# into a virtualenv under $FOREWARN_TOOLS (~15 s) and reused by path; it
# only ever listens on 127.0.0.1.
#
#   scripts/s3.sh install               create $FOREWARN_TOOLS/s3-venv with moto unless present
#   scripts/s3.sh start PORT DIR        start on 127.0.0.1:PORT; PID in DIR/moto.pid, log in DIR/moto.log
#   scripts/s3.sh stop DIR              stop the server started with DIR
#   scripts/s3.sh bucket PORT NAME      create bucket NAME on the server at 127.0.0.1:PORT
#   scripts/s3.sh path                  print the server program's path
#
# The end-to-end tests start and stop their own servers (by PID) from the
# same program; start/stop here are for trying forewarn by hand, with
#   AWS_ENDPOINT_URL=http://127.0.0.1:PORT AWS_ALLOW_HTTP=true
#   AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1
# and checkpoint.store = "s3://NAME/prefix".
set -euo pipefail

TOOLS="${FOREWARN_TOOLS:-$HOME/.cache/forewarn/tools}"
VENV="$TOOLS/s3-venv"
SERVER="$VENV/bin/moto_server"
VERSION=5.2.5

case "${1:-}" in
  install)
    if [ -x "$SERVER" ] && "$VENV/bin/python" -c "import moto, sys; sys.exit(moto.__version__ != '$VERSION')" 2>/dev/null; then
      echo "== moto $VERSION already installed at $SERVER"
      exit 0
    fi
    echo "== installing moto[s3] $VERSION and its server into $VENV (pip; ~15 s once)"
    command -v python3 >/dev/null || { echo "s3.sh: python3 is needed (with its venv module)" >&2; exit 1; }
    rm -rf "$VENV"
    if ! python3 -m venv "$VENV" 2>/dev/null; then
      # Debian's python3 keeps venv in its own package.
      [ "$(id -u)" -eq 0 ] || { echo "s3.sh: python3 -m venv failed; install python3-venv" >&2; exit 1; }
      apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
      python3 -m venv "$VENV"
    fi
    "$VENV/bin/pip" install -q --disable-pip-version-check \
      "moto[s3]==$VERSION" "flask==3.1.3" "flask-cors==6.0.5"
    [ -x "$SERVER" ] || { echo "s3.sh: $SERVER missing after the install" >&2; exit 1; }
    ;;
  start)
    port="${2:?usage: s3.sh start PORT DIR}"
    dir="${3:?usage: s3.sh start PORT DIR}"
    mkdir -p "$dir"
    "$SERVER" -H 127.0.0.1 -p "$port" >"$dir/moto.log" 2>&1 &
    echo $! >"$dir/moto.pid"
    for _ in $(seq 1 100); do
      if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        echo "moto listening on 127.0.0.1:$port (pid $(cat "$dir/moto.pid"))"
        exit 0
      fi
      sleep 0.1
    done
    echo "s3.sh: moto did not start; see $dir/moto.log" >&2
    exit 1
    ;;
  stop)
    dir="${2:?usage: s3.sh stop DIR}"
    if [ -f "$dir/moto.pid" ]; then
      kill "$(cat "$dir/moto.pid")" 2>/dev/null || true
      rm -f "$dir/moto.pid"
    fi
    ;;
  bucket)
    port="${2:?usage: s3.sh bucket PORT NAME}"
    name="${3:?usage: s3.sh bucket PORT NAME}"
    # moto does not check signatures: a plain PUT creates the bucket.
    exec 3<>"/dev/tcp/127.0.0.1/$port"
    printf 'PUT /%s HTTP/1.1\r\nHost: 127.0.0.1:%s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n' "$name" "$port" >&3
    status="$(head -n 1 <&3)"
    exec 3>&-
    case "$status" in
      *" 200"*) echo "bucket $name created" ;;
      *) echo "s3.sh: creating bucket $name: $status" >&2; exit 1 ;;
    esac
    ;;
  path)
    echo "$SERVER"
    ;;
  *)
    sed -n '2,21p' "$0"
    exit 2
    ;;
esac
