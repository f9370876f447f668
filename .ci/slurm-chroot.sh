#!/usr/bin/env bash
# A newer Slurm beside the host's 22.05: a Debian chroot (debootstrap, minbase) with that release's
# Slurm packages, in which .ci/slurm-testbed.sh (unchanged) runs its private cluster.
#
#   .ci/slurm-chroot.sh build RELEASE           # debootstrap + packages, cached (skipped when done)
#   eval "$(.ci/slurm-chroot.sh start RELEASE)" # build, mount, start the testbed: prints `export ...`
#   .ci/slurm-chroot.sh run RELEASE CMD...      # CMD inside the chroot, in this directory, with the
#                                               # testbed's SLURM_CONF: Slurm's commands are RELEASE's
#   .ci/slurm-chroot.sh status|stop RELEASE     # the testbed's status; stop it and unmount everything
#
# RELEASE: trixie (Slurm 24.11) or sid (Slurm 26.05); 24.11 and 26.05 are accepted as names too.
# The chroot is built once per machine in $SLURM_ADVISOR_CHROOT_CACHE (default
# /var/cache/slurm-advisor-chroots)/RELEASE and reused while its stamp matches this script's
# package list. Bind-mounted at the same paths: /proc, /sys, /dev, /dev/pts, this repository, the
# Python virtual environment ($SLURM_ADVISOR_VENV, default ./.venv) and the interpreter it was made
# from; /etc/hosts is copied in (without it slurmctld cannot resolve the host name), and the host's
# CA bundle (pip behind a TLS-intercepting proxy). The testbed's
# ports and directory default per release and follow SLURM_ADVISOR_TESTBED_PORT, _NODE_PORT, _DIR
# _HOOK and _TOPOLOGY as .ci/slurm-testbed.sh does. `stop` unmounts exactly what `start` mounted (listed in
# the chroot's run/mounts) and checks with findmnt that nothing is left. Runs as root.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${SLURM_ADVISOR_CHROOT_CACHE:-/var/cache/slurm-advisor-chroots}
MIRROR=${SLURM_ADVISOR_CHROOT_MIRROR:-http://deb.debian.org/debian}
PACKAGES=(slurmctld slurmd slurm-client munge lua-socket lua5.1 libffi8 libsqlite3-0 libbz2-1.0 liblzma5
          libexpat1 zlib1g procps)
# trixie also gets the Python a trixie site makes its venv with (the README's install section runs
# there: tests/test_site_install.py). The versioned package only: `python3` would become
# /usr/bin/python3, which the bind-mounted venv's interpreter may be a link to.
TRIXIE_PACKAGES=(python3.13-venv)

log() { printf 'slurm-chroot: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

release_name() {
    case "$1" in
        trixie|24.11) echo trixie ;;
        sid|26.05) echo sid ;;
        *) die "unknown release '$1' (trixie or 24.11, sid or 26.05)" ;;
    esac
}

# Per release: default testbed ports and directory (beside the host's 22.05 testbed on 16817).
default_port() { case "$1" in trixie) echo 36817 ;; sid) echo 56817 ;; esac; }
default_node_port() { case "$1" in trixie) echo 37001 ;; sid) echo 57001 ;; esac; }

release_packages() {
    printf '%s\n' "${PACKAGES[@]}"
    if [ "$RELEASE" = trixie ]; then printf '%s\n' "${TRIXIE_PACKAGES[@]}"; fi
}

# sid's stamp is the same as before trixie's extra package: only trixie is rebuilt for it.
stamp_want() { { echo "$MIRROR"; release_packages; } | sha256sum | cut -d' ' -f1; }

mounted() { findmnt -rn --mountpoint "$1" > /dev/null 2>&1; }

under_mounts() {
    # Mount points at or below directory $1 (a chroot must have none before it is deleted).
    findmnt -rn -o TARGET | awk -v d="$1" '$0 == d || index($0, d "/") == 1'
}

bind() {
    # bind SRC DST [ro]: mount SRC at DST (created as a file or directory like SRC), and record it.
    local src=$1 dst=$2
    mounted "$dst" && return 0
    if [ -d "$src" ]; then mkdir -p "$dst"; else mkdir -p "$(dirname "$dst")"; touch "$dst"; fi
    case "${3:-}" in
        # with the mounts below it (slurmd 24.11+ wants /sys/fs/cgroup), kept from propagating back
        recursive) mount --rbind "$src" "$dst"; mount --make-rslave "$dst" ;;
        ro) mount --bind "$src" "$dst"; mount -o remount,bind,ro "$dst" ;;
        *) mount --bind "$src" "$dst" ;;
    esac
    echo "$dst" >> "$MOUNTS"
}

unmount_all() {
    # Unmount what bind() recorded, last first, each by its exact path.
    [ -f "$MOUNTS" ] || return 0
    local dst
    tac "$MOUNTS" | while read -r dst; do
        if mounted "$dst"; then umount -R "$dst" || umount -R -l "$dst"; fi
    done
    rm -f "$MOUNTS"
    local left
    left=$(under_mounts "$ROOT")
    [ -z "$left" ] || die "still mounted under $ROOT: $left"
}

mount_system() {
    install -d "$ROOT/run"
    bind /proc "$ROOT/proc"
    bind /sys "$ROOT/sys" recursive
    bind /dev "$ROOT/dev"
    bind /dev/pts "$ROOT/dev/pts"
}

in_chroot() { chroot "$ROOT" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"; }

build() {
    if [ "$(cat "$ROOT/.slurm-advisor-stamp" 2>/dev/null)" = "$(stamp_want)" ]; then return 0; fi
    [ "$(id -u)" = 0 ] || die "run as root (debootstrap, chroot, mount)"
    install -d "$CACHE"
    exec 9> "$CACHE/.$RELEASE.lock"  # one build of a release at a time on this machine
    flock 9
    if [ "$(cat "$ROOT/.slurm-advisor-stamp" 2>/dev/null)" = "$(stamp_want)" ]; then return 0; fi  # built meanwhile
    command -v debootstrap > /dev/null || {
        log "installing debootstrap"
        apt-get update -qq >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >&2
    }
    [ -z "$(under_mounts "$ROOT")" ] || die "$ROOT has mounts; run '$0 stop $RELEASE' first"
    log "building $ROOT ($RELEASE, minbase) from $MIRROR"
    rm -rf "$ROOT"
    debootstrap --variant=minbase "$RELEASE" "$ROOT" "$MIRROR" >&2 || die "debootstrap $RELEASE failed"
    # Packages must not start services in the chroot: the testbed starts its own daemons.
    printf '#!/bin/sh\nexit 101\n' > "$ROOT/usr/sbin/policy-rc.d"
    chmod 0755 "$ROOT/usr/sbin/policy-rc.d"
    cp /etc/hosts "$ROOT/etc/hosts"
    mount_system
    trap unmount_all EXIT
    # sid's Release files may be past their Valid-Until on a mirror snapshot.
    in_chroot apt-get update -qq -o Acquire::Check-Valid-Until=false >&2
    # shellcheck disable=SC2046
    in_chroot env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        $(release_packages) >&2
    in_chroot apt-get clean
    unmount_all
    trap - EXIT
    stamp_want > "$ROOT/.slurm-advisor-stamp"
    log "built $ROOT: $(in_chroot slurmctld -V)"
}

python_paths() {
    # The interpreter the venv was made from, as paths to bind: its prefix, or for a system Python
    # (prefix /usr) the binary and its library directory; the venv's python3 link is made too.
    local prefix version link
    prefix=$("$VENV/bin/python" -c 'import sys; print(sys.base_prefix)')
    version=$("$VENV/bin/python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
    if [ "$prefix" = /usr ]; then
        echo "/usr/bin/python$version"
        echo "/usr/lib/python$version"
        link=$(readlink "$VENV/bin/python3" || true)  # /usr/bin/python3, which minbase lacks
        if [ "$link" = /usr/bin/python3 ] && [ ! -e "$ROOT/usr/bin/python3" ]; then
            ln -s "python$version" "$ROOT/usr/bin/python3"
        fi
    else
        echo "$prefix"
    fi
}

mount_all() {
    cp /etc/hosts "$ROOT/etc/hosts"
    # The host's trusted CAs: a machine behind a TLS-intercepting proxy (a site's, a CI sandbox's)
    # trusts the proxy's CA, and pip in the chroot (the README's install, tested there) must too.
    if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
        mkdir -p "$ROOT/etc/ssl/certs"
        cp /etc/ssl/certs/ca-certificates.crt "$ROOT/etc/ssl/certs/ca-certificates.crt"
    fi
    mount_system
    bind "$HERE" "$ROOT$HERE"
    local venv path
    venv=$(cd "$VENV" && pwd -P)
    case "$venv/" in "$HERE"/*) ;; *) bind "$venv" "$ROOT$venv" ro ;; esac
    while read -r path; do bind "$path" "$ROOT$path" ro; done < <(python_paths)
}

testbed_env() {
    echo "SLURM_ADVISOR_TESTBED_DIR=$TESTBED_DIR" "SLURM_ADVISOR_TESTBED_PORT=$PORT" \
        "SLURM_ADVISOR_TESTBED_NODE_PORT=$NODE_PORT" \
        ${SLURM_ADVISOR_TESTBED_HOOK:+"SLURM_ADVISOR_TESTBED_HOOK=$SLURM_ADVISOR_TESTBED_HOOK"} \
        ${SLURM_ADVISOR_TESTBED_SOCKET:+"SLURM_ADVISOR_TESTBED_SOCKET=$SLURM_ADVISOR_TESTBED_SOCKET"} \
        ${SLURM_ADVISOR_TESTBED_TOPOLOGY:+"SLURM_ADVISOR_TESTBED_TOPOLOGY=$SLURM_ADVISOR_TESTBED_TOPOLOGY"}
}

testbed() {
    # .ci/slurm-testbed.sh ACTION inside the chroot, from this repository's path there.
    # shellcheck disable=SC2046
    chroot "$ROOT" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 $(testbed_env) \
        bash -c 'cd "$1" && exec bash .ci/slurm-testbed.sh "$2"' _ "$HERE" "$1"
}

start() {
    build
    mount_all
    testbed start > /dev/null || die "the testbed did not start in $ROOT; logs in $ROOT$TESTBED_DIR/log"
    echo "export SLURM_CONF=$TESTBED_DIR/etc/slurm.conf"
}

stop() {
    if [ -f "$MOUNTS" ] && mounted "$ROOT$HERE"; then testbed stop || true; fi
    unmount_all
}

run_in() {
    # CMD inside the chroot, in the current directory, with this environment (PATH put first to the
    # chroot's system directories, so sbatch and scontrol are the release's) and the testbed's SLURM_CONF.
    [ $# -gt 0 ] || die "usage: $0 run RELEASE CMD..."
    mounted "$ROOT$HERE" || die "$RELEASE chroot not started: $0 start $RELEASE"
    chroot "$ROOT" env PATH="/usr/sbin:/usr/bin:/sbin:/bin:$PATH" SLURM_CONF="$TESTBED_DIR/etc/slurm.conf" \
        SLURM_ADVISOR_TESTBED_DIR="$TESTBED_DIR" \
        bash -c 'cd "$1" && shift && exec "$@"' _ "$PWD" "$@"
}

ACTION=${1:-}
[ $# -ge 2 ] || { echo "usage: $0 build|start|status|stop|run RELEASE [CMD...]" >&2; exit 2; }
RELEASE=$(release_name "$2")
shift 2
ROOT=$CACHE/$RELEASE
MOUNTS=$ROOT/run/slurm-advisor-mounts
VENV=${SLURM_ADVISOR_VENV:-$HERE/.venv}
PORT=${SLURM_ADVISOR_TESTBED_PORT:-$(default_port "$RELEASE")}
NODE_PORT=${SLURM_ADVISOR_TESTBED_NODE_PORT:-$(default_node_port "$RELEASE")}
TESTBED_DIR=${SLURM_ADVISOR_TESTBED_DIR:-/tmp/slurm-advisor-testbed-$RELEASE}

case "$ACTION" in
    build) build ;;
    start) start ;;
    stop) stop ;;
    status) testbed status ;;
    run) run_in "$@" ;;
    *) echo "usage: $0 build|start|status|stop|run RELEASE [CMD...]" >&2; exit 2 ;;
esac
