#!/usr/bin/env bash
# Runs the README's two commands, and CI's tsan step, on a fresh Debian 12:
# debootstrap --variant=minbase bookworm into a temporary directory, install
# only git and ca-certificates, clone this repo at REF, then as root inside
# the chroot: scripts/demo.sh, scripts/test.sh, scripts/tsan.sh (test.sh then
# tsan.sh is .ci/run). Prints each command's wall-clock time; exits non-zero
# if any fails. The chroot shares this machine's network (apt mirror, npm
# registry) and kernel, nothing else: its own /root/.cache (cold ccache, no
# llama.cpp), no host environment variables (env -i) except what belongs to
# the network: proxy variables, and where the network intercepts TLS, the
# host's locally added CAs (/usr/local/share/ca-certificates) and
# NODE_EXTRA_CA_CERTS (node ignores the system store).
#   sudo scripts/fresh-debian-check.sh                  # HEAD, all three
#   scripts/fresh-debian-check.sh --ref main --no-tsan --keep
#   scripts/fresh-debian-check.sh --dir /var/tmp/agentkv-fresh.X --steps test
#       (reuse a kept chroot, rerun steps in its existing clone)
# Options: --ref REF (default HEAD; committed state only, uncommitted edits are
# not seen), --no-tsan, --steps "demo test tsan", --keep (leave the chroot,
# unmounted, for debugging), --dir DIR (work directory; default a new
# mktemp -d under $TMPDIR or /var/tmp), --mirror URL (default: this machine's
# apt mirror). Takes as long as a cold build and more (30-45 min on 2 cores).
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
REF=HEAD; STEPS="demo test tsan"; KEEP=0; DIR=""; MIRROR=""
while [ $# -gt 0 ]; do
  case "$1" in
    --ref) REF=$2; shift 2 ;;
    --no-tsan) STEPS=${STEPS/tsan/}; shift ;;
    --steps) STEPS=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --dir) DIR=$2; shift 2 ;;
    --mirror) MIRROR=$2; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "fresh-debian-check: unknown option $1" >&2; exit 2 ;;
  esac
done
if [ "$(id -u)" -ne 0 ]; then
  echo "fresh-debian-check: needs root (debootstrap, chroot, mounts); try sudo $0" >&2
  exit 2
fi
COMMIT=$(git -C "$REPO" rev-parse --verify "$REF^{commit}")

# The mirror this machine's apt uses (deb822 .sources or one-line lists).
host_uri() {  # $1: regex the URI must (not) match, $2: fallback
  local u
  u=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '/^URIs:/ {for (i = 2; i <= NF; i++) print $i}'
      cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
        awk '$1 == "deb" {for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) {print $i; break}}')
  u=$(echo "$u" | grep -E "$1" | grep -v -e nodesource -e google | head -n1 || true)
  echo "${u:-$2}"
}
[ -n "$MIRROR" ] || MIRROR=$(host_uri '/debian/?$' http://deb.debian.org/debian)
SECURITY=$(host_uri '/debian-security/?$' http://deb.debian.org/debian-security)

if ! command -v debootstrap >/dev/null 2>&1; then
  echo "fresh-debian-check: installing debootstrap"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
fi

if [ -z "$DIR" ]; then
  DIR=$(mktemp -d "${TMPDIR:-/var/tmp}/agentkv-fresh.XXXXXX")
fi
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
ROOTFS=$DIR/rootfs

MOUNTS=()
mounted_under() { awk -v r="$ROOTFS" '$2 == r || index($2, r "/") == 1 {print $2}' /proc/self/mounts; }
cleanup() {
  local rc=$? m i
  set +e
  for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do
    m=${MOUNTS[$i]}
    umount "$m" 2>/dev/null || umount -l "$m"
  done
  # Anything still mounted under the chroot (e.g. by a crashed earlier run):
  # lazily detach, deepest first, before anything is deleted.
  for m in $(mounted_under | sort -r); do umount -l "$m"; done
  if [ "$KEEP" = 1 ]; then
    echo "fresh-debian-check: kept $DIR (rerun: $0 --dir $DIR --steps '...')"
  elif [ -n "$(mounted_under)" ]; then
    echo "fresh-debian-check: still mounted under $ROOTFS, not deleting $DIR" >&2
  else
    rm -rf --one-file-system "$DIR"
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mnt() {  # mnt TARGET mount-args...
  local t=$1; shift
  mkdir -p "$t"
  mount "$@" "$t"
  MOUNTS+=("$t")
}

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.0f", b - a}'; }
# A root login shell's environment, nothing from this one (proxies aside).
in_chroot() {
  local envs=(HOME=/root USER=root LOGNAME=root SHELL=/bin/bash TERM=dumb
              PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)
  local v
  for v in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do
    [ -n "${!v:-}" ] && envs+=("$v=${!v}")
  done
  [ -n "${NODE_EXTRA_CA_CERTS:-}" ] && envs+=(NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt)
  chroot "$ROOTFS" /usr/bin/env -i "${envs[@]}" /bin/bash -c "$1"
}

echo "fresh-debian-check: commit $COMMIT ($REF), steps: $STEPS, dir $DIR"
echo "fresh-debian-check: host $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 2^20}' /proc/meminfo), mirror $MIRROR"
T_SETUP=$(now)
fresh=0
if [ ! -x "$ROOTFS/bin/bash" ]; then
  fresh=1
  echo "== debootstrap --variant=minbase bookworm $ROOTFS $MIRROR"
  debootstrap --variant=minbase bookworm "$ROOTFS" "$MIRROR" >"$DIR/debootstrap.log" 2>&1 ||
    { tail -n 30 "$DIR/debootstrap.log"; exit 1; }
  cat >"$ROOTFS/etc/apt/sources.list" <<EOF
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb $SECURITY bookworm-security main
EOF
fi
mnt "$ROOTFS/proc" -t proc proc
mnt "$ROOTFS/sys" -t sysfs sysfs
mnt "$ROOTFS/dev" --bind /dev
mount --make-rslave "$ROOTFS/dev"  # mounts below it must not propagate to the host's /dev
mnt "$ROOTFS/dev/pts" --bind /dev/pts
mnt "$ROOTFS/dev/shm" -t tmpfs -o mode=1777 tmpfs
cp -L /etc/resolv.conf "$ROOTFS/etc/resolv.conf"
[ -s "$ROOTFS/etc/hosts" ] || printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >"$ROOTFS/etc/hosts"
chmod 1777 "$ROOTFS/tmp"

if [ "$fresh" = 1 ] || [ ! -d "$ROOTFS/root/agentkv/.git" ]; then
  echo "== apt-get install git ca-certificates (chroot)"
  if compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
    echo "fresh-debian-check: carrying the network's CAs: $(cd /usr/local/share/ca-certificates && echo *.crt)"
    mkdir -p "$ROOTFS/usr/local/share/ca-certificates"
    cp /usr/local/share/ca-certificates/*.crt "$ROOTFS/usr/local/share/ca-certificates/"
  fi
  in_chroot 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends git ca-certificates >/dev/null'
  # The repo goes in as a bare copy; the chroot's own git clones it.
  rm -rf "$ROOTFS/root/src.git"
  git clone -q --bare --no-local "$REPO" "$ROOTFS/root/src.git"
  git -C "$REPO" push -q "$ROOTFS/root/src.git" "$COMMIT:refs/heads/fresh-check"
  in_chroot "git clone -q /root/src.git /root/agentkv && git -C /root/agentkv -c advice.detachedHead=false checkout -q $COMMIT"
fi
echo "fresh-debian-check: setup $(secs "$T_SETUP" "$(now)") s; chroot: $(in_chroot '. /etc/os-release; echo "$PRETTY_NAME"'), clone at $(in_chroot 'git -C /root/agentkv rev-parse --short HEAD')"

declare -A TIME RESULT
failed=0
for step in $STEPS; do
  echo "== scripts/$step.sh (chroot, root, /root/agentkv)"
  t=$(now)
  if in_chroot "cd /root/agentkv && scripts/$step.sh"; then RESULT[$step]=ok; else RESULT[$step]=FAIL; failed=1; fi
  TIME[$step]=$(secs "$t" "$(now)")
  echo "fresh-debian-check: scripts/$step.sh ${RESULT[$step]} in ${TIME[$step]} s"
done

echo "== summary (commit ${COMMIT:0:12}, $(nproc)-core host)"
in_chroot 'echo "chroot: node $(node --version 2>/dev/null || echo none), npm $(npm --version 2>/dev/null || echo none), python3 $(python3 --version 2>/dev/null | cut -d" " -f2), g++ $(g++ -dumpfullversion 2>/dev/null), cmake $(cmake --version 2>/dev/null | head -n1 | cut -d" " -f3)"'
for step in $STEPS; do
  printf '  scripts/%-8s %-4s %6s s\n' "$step.sh" "${RESULT[$step]}" "${TIME[$step]}"
done
[ "$failed" = 0 ] && echo "fresh-debian-check: PASS" || echo "fresh-debian-check: FAIL"
exit "$failed"
