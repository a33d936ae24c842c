#!/usr/bin/env bash
# Checks what deploy/ ships for installing forewarn (docs/deploy.md):
#
#   the systemd unit   systemd-analyze verify, and systemd-analyze security
#                      --offline: fails above an exposure of $MAX_EXPOSURE
#   the Helm chart     helm lint --strict and helm template (Helm's Go SDK,
#                      the PyPI wheel helm-python-sdk), every rendered object
#                      against the Kubernetes schemas (kubernetes-validate),
#                      forewarn's own rules (deploy/helm/check.py)
#   the image          only with --image (minutes, not seconds): builds
#                      deploy/docker/Dockerfile with podman, runs it, asks
#                      /healthz and /readyz, stops it, removes every layer
#
#   scripts/package-check.sh                  unit + chart (~5 s once tools are cached)
#   scripts/package-check.sh --image          ... and the image, from `cargo build --profile dist`
#   scripts/package-check.sh --image --binary PATH   ... from that binary instead
#
# Installs what it needs: Debian's systemd (for systemd-analyze), a Python
# venv with the pinned chart tools under $FOREWARN_TOOLS (default
# ~/.cache/forewarn/tools), and for --image Debian's podman, runc and
# debootstrap. Re-running is safe: cached tools are reused, nothing is left
# in the tree but dist/forewarn (git-ignored) and no image stays on disk.
set -euo pipefail
cd "$(dirname "$0")/.."

TOOLS="${FOREWARN_TOOLS:-$HOME/.cache/forewarn/tools}"
VENV="$TOOLS/package-venv"
HELM_SDK=helm-python-sdk==0.2.2
KUBE_VALIDATE=kubernetes-validate==1.37.0
MAX_EXPOSURE=2.0

image=0
binary=""
while [ $# -gt 0 ]; do
  case "$1" in
    --image) image=1 ;;
    --binary) binary="${2:?--binary PATH}"; shift ;;
    *) sed -n '2,24p' "$0"; exit 2 ;;
  esac
  shift
done

apt_install() {
  if [ "$(id -u)" != 0 ]; then
    echo "package-check: missing $*; not root: apt-get install $*" >&2
    exit 1
  fi
  echo "== installing $* (apt-get)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

tmp=$(mktemp -d)
cleanup() {
  if [ -f "$tmp/storage.conf" ] && command -v podman >/dev/null; then
    CONTAINERS_STORAGE_CONF="$tmp/storage.conf" podman rm -af >/dev/null 2>&1 || true
    CONTAINERS_STORAGE_CONF="$tmp/storage.conf" podman system reset -f >/dev/null 2>&1 || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

# ---- systemd unit ----
command -v systemd-analyze >/dev/null || apt_install systemd
unit=deploy/systemd/forewarn.service
echo "== systemd-analyze verify $unit"
# verify checks that ExecStart's program exists: point it at a stand-in.
printf '#!/bin/sh\nexit 0\n' >"$tmp/forewarn" && chmod +x "$tmp/forewarn"
sed "s|/usr/local/bin/forewarn|$tmp/forewarn|" "$unit" >"$tmp/forewarn.service"
out=$(systemd-analyze verify "$tmp/forewarn.service" 2>&1) || { echo "$out"; exit 1; }
# Warnings (an unknown key, a key in the wrong section) exit 0: fail on them too.
if [ -n "$out" ]; then echo "$out"; echo "package-check: systemd-analyze verify complained" >&2; exit 1; fi
echo "== systemd-analyze security --offline=true $unit"
sec=$(systemd-analyze security --offline=true --no-pager "$tmp/forewarn.service" 2>&1)
echo "$sec" | grep -E '^✗' || true
score=$(echo "$sec" | sed -n 's/.*Overall exposure level for forewarn.service: \([0-9.]*\).*/\1/p')
echo "exposure $score (0 best, 10 worst; at most $MAX_EXPOSURE allowed)"
awk -v s="$score" -v m="$MAX_EXPOSURE" 'BEGIN { exit !(s != "" && s + 0 <= m + 0) }' ||
  { echo "package-check: exposure ${score:-unknown} is over $MAX_EXPOSURE" >&2; exit 1; }

# ---- Helm chart ----
want="$HELM_SDK $KUBE_VALIDATE"
if [ "$(cat "$VENV/.installed" 2>/dev/null)" != "$want" ]; then
  echo "== installing $want into $VENV"
  python3 -m venv --help >/dev/null 2>&1 && python3 -c 'import ensurepip' 2>/dev/null || apt_install python3-venv
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check $HELM_SDK $KUBE_VALIDATE
  echo "$want" >"$VENV/.installed"
fi
echo "== helm lint / helm template / schemas: deploy/helm/forewarn"
"$VENV/bin/python" deploy/helm/check.py deploy/helm/forewarn

[ "$image" = 1 ] || exit 0

# ---- image ----
need=()
command -v podman >/dev/null || need+=(podman)
command -v runc >/dev/null || need+=(runc)
command -v debootstrap >/dev/null || need+=(debootstrap)
[ ${#need[@]} = 0 ] || apt_install "${need[@]}"

if [ -z "$binary" ]; then
  echo "== cargo build --profile dist --locked -p detector"
  cargo build --profile dist --locked -p detector
  binary="${CARGO_TARGET_DIR:-target}/dist/forewarn"
fi
mkdir -p dist
cp "$binary" dist/forewarn

# Images and layers in a storage of their own under $tmp, removed on exit.
cat >"$tmp/storage.conf" <<EOF
[storage]
driver = "overlay"
graphroot = "$tmp/storage"
runroot = "$tmp/run"
EOF
export CONTAINERS_STORAGE_CONF="$tmp/storage.conf"

# No container registry answers here: the runtime base is Debian bookworm
# made by debootstrap from Debian's own mirror, trimmed like the -slim
# image, and imported. Elsewhere: FOREWARN_RUNTIME_IMAGE=docker.io/library/debian:bookworm-slim.
base="${FOREWARN_RUNTIME_IMAGE:-}"
if [ -z "$base" ]; then
  echo "== debootstrap --variant=minbase bookworm (the runtime base)"
  debootstrap --variant=minbase bookworm "$tmp/rootfs" http://deb.debian.org/debian >"$tmp/debootstrap.log" 2>&1 ||
    { tail -20 "$tmp/debootstrap.log"; exit 1; }
  r="$tmp/rootfs"
  rm -rf "$r"/var/cache/apt/*.bin "$r"/var/cache/apt/archives/*.deb "$r"/var/lib/apt/lists/* \
    "$r"/usr/share/doc/* "$r"/usr/share/man/* "$r"/usr/share/info/*
  find "$r/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
  base=localhost/forewarn-base:bookworm
  tar -C "$r" --numeric-owner -cf - . | podman import -q --change 'CMD ["bash"]' - "$base" >/dev/null
  rm -rf "$r"
fi

echo "== podman build (runtime base $base, binary dist/forewarn)"
start=$(date +%s)
podman build -q --format docker --isolation chroot -f deploy/docker/Dockerfile \
  --target runtime-prebuilt --build-arg RUNTIME_IMAGE="$base" \
  --build-arg GIT_COMMIT="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" \
  -t localhost/forewarn:check . >/dev/null
echo "built in $(($(date +%s) - start)) s; $(podman image inspect localhost/forewarn:check --format '{{.Size}}' |
  awk '{printf "%.1f MB", $1 / 1e6}') (base $(podman image inspect "$base" --format '{{.Size}}' | awk '{printf "%.1f MB", $1 / 1e6}'))"
podman image inspect localhost/forewarn:check --format 'user {{.Config.User}}, volumes {{json .Config.Volumes}}, cmd {{json .Config.Cmd}}'

# Run it: host network on a free loopback port (this VM's own rules), runc
# (crun refuses this VM's hybrid cgroups), limits within the VM's hard ones.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
echo "== podman run: serve on 127.0.0.1:$port"
podman run -d --name forewarn-check --runtime runc --network host \
  --ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" --ulimit nproc=4096:4096 \
  --read-only --tmpfs /tmp -e FOREWARN_HEALTH_PORT="$port" -e FOREWARN_API_TOKEN=check \
  localhost/forewarn:check serve --config /etc/forewarn/forewarn.toml --listen "127.0.0.1:$port" \
  >/dev/null 2>"$tmp/run.err" || { cat "$tmp/run.err"; exit 1; }
# (podman's complaints that it cannot start systemd timers for the
# HEALTHCHECK, with no systemd here, are in $tmp/run.err; the check itself
# is run by hand below.)
ok=0
for _ in $(seq 1 100); do
  if curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1; then ok=1; break; fi
  sleep 0.2
done
if [ "$ok" != 1 ]; then podman logs forewarn-check | tail -20; echo "package-check: /healthz never answered 200" >&2; exit 1; fi
echo "/healthz 200; /readyz $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/readyz")"
# The image's own HEALTHCHECK command, as the engine runs it.
hc=$(podman image inspect localhost/forewarn:check --format '{{json .HealthCheck.Test}}')
python3 -c 'import json,sys; t=json.loads(sys.argv[1]); sys.exit(0 if t[0]=="CMD" else 1)' "$hc" ||
  { echo "package-check: no HEALTHCHECK in the image ($hc)" >&2; exit 1; }
mapfile -t hcargs < <(python3 -c 'import json,sys; print("\n".join(json.loads(sys.argv[1])[1:]))' "$hc")
podman exec forewarn-check "${hcargs[@]}" && echo "HEALTHCHECK command: healthy"
# The state went to the volume, owned by the image's user.
podman exec forewarn-check sh -c 'cd /var/lib/forewarn && ls -n' | awk 'NR > 1 { print "  state:", $3 ":" $4, $NF }'
# SIGTERM: forewarn stops cleanly and exits 0.
podman stop -t 60 forewarn-check >/dev/null 2>&1
code=$(podman inspect forewarn-check --format '{{.State.ExitCode}}')
podman logs forewarn-check 2>&1 | tail -3
[ "$code" = 0 ] || { echo "package-check: the container exited $code on SIGTERM" >&2; exit 1; }
echo "stopped on SIGTERM, exit 0"
echo "image checks passed (layers removed on exit)"
