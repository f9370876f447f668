#!/usr/bin/env bash
# A private, throwaway Slurm 22.05 cluster on this machine for the integration tests (pytest -m slurm):
# one slurmctld and four slurmd (n1..n4: 8 CPUs, 4 fake GPUs, 32000 MB each) on localhost.
#
#   eval "$(.ci/slurm-testbed.sh start)"   # prints `export SLURM_CONF=...`; also written to $ROOT/env
#   .ci/slurm-testbed.sh status            # what runs, by PID, and sinfo (exit 0: all of it)
#   .ci/slurm-testbed.sh stop              # cancels the testbed's jobs, stops the daemons by their PIDs
#
# All three are idempotent: `start` on a running testbed only waits for the nodes and prints the
# line again; `stop` on a stopped one does nothing. Everything lives in $SLURM_ADVISOR_TESTBED_DIR
# (default /tmp/slurm-advisor-testbed; SLURM_ADVISOR_TESTBED_PORT and _NODE_PORT move its ports): config, state, spool, logs, PID files, and a private munged
# socket (the system munge key, /etc/munge/munge.key, is created if missing). `start` installs the
# Debian packages when slurmctld is missing. Only stdout carries the export line; logs go to stderr
# and to $ROOT/log. Runs as root (SlurmUser=root): for tests only.
# SLURM_ADVISOR_TESTBED_TOPOLOGY=block gives the cluster topology/block (Slurm 23.11+, topology.conf),
# =block-yaml the same blocks from topology.yaml (25.05+; no TopologyPlugin line): two base blocks
# of two nodes, b1 = n[1-2] and b2 = n[3-4], BlockSizes 2 and 4.
set -euo pipefail

ROOT=${SLURM_ADVISOR_TESTBED_DIR:-/tmp/slurm-advisor-testbed}
NODES=(n1 n2 n3 n4)
CTLD_PORT=${SLURM_ADVISOR_TESTBED_PORT:-16817}
# slurmd ports: NODE_PORT..NODE_PORT+3 (two testbeds side by side need their own dir and ports)
NODE_PORT=${SLURM_ADVISOR_TESTBED_NODE_PORT:-17001}
WAIT_S=${SLURM_ADVISOR_TESTBED_WAIT_S:-45}
CONF=$ROOT/etc/slurm.conf
MUNGE_SOCKET=$ROOT/munge/munge.socket
MUNGE_PIDFILE=$ROOT/munge/munged.pid
CTLD_PIDFILE=$ROOT/run/slurmctld.pid
export SLURM_CONF=$CONF

log() { printf 'slurm-testbed: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

install_packages() {
    command -v slurmctld > /dev/null && command -v slurmd > /dev/null && command -v munged > /dev/null \
        && command -v sbatch > /dev/null && return 0
    [ "$(id -u)" = 0 ] || die "run as root (installs packages, runs slurmd as root)"
    log "installing slurmctld slurmd slurm-client munge lua5.1 lua-socket"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        slurmctld slurmd slurm-client munge lua5.1 lua-socket >&2
}

alive() {
    # The PID in pid file $1 if that process is alive; nothing otherwise.
    [ -f "$1" ] || return 0
    local pid
    pid=$(head -n 1 "$1")
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then echo "$pid"; fi
}

slurmd_pidfile() { echo "$ROOT/run/slurmd-$1.pid"; }

start_munge() {
    if [ ! -s /etc/munge/munge.key ]; then
        log "creating /etc/munge/munge.key"
        install -d -o munge -g munge -m 0700 /etc/munge
        dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
        chown munge:munge /etc/munge/munge.key
        chmod 0400 /etc/munge/munge.key
    fi
    [ -n "$(alive "$MUNGE_PIDFILE")" ] && return 0
    install -d -o munge -g munge -m 0755 "$ROOT/munge"  # munged wants the socket dir searchable by all
    runuser -u munge -- munged --socket="$MUNGE_SOCKET" --pid-file="$MUNGE_PIDFILE" \
        --log-file="$ROOT/munge/munged.log" --seed-file="$ROOT/munge/munged.seed" >&2 \
        || die "munged did not start; see $ROOT/munge/munged.log"
}

make_gpus() {
    # Fake GPUs: character devices with /dev/null's numbers. Every slurmd shares the same four.
    install -d "$ROOT/dev"
    local i
    for i in 0 1 2 3; do
        [ -c "$ROOT/dev/gpu$i" ] || mknod "$ROOT/dev/gpu$i" c 1 3
    done
}

write_config() {
    install -d "$ROOT/etc" "$ROOT/state" "$ROOT/run" "$ROOT/log"
    local n
    for n in "${NODES[@]}"; do install -d "$ROOT/spool/$n"; done
    cat > "$ROOT/etc/gres.conf" <<EOF
NodeName=n[1-4] Name=gpu File=$ROOT/dev/gpu[0-3]
EOF
    cat > "$CONF.new" <<EOF
# Written by .ci/slurm-testbed.sh: a private test cluster, not for production.
ClusterName=advisor-testbed
SlurmctldHost=$(hostname -s)(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCKET
StateSaveLocation=$ROOT/state
SlurmdSpoolDir=$ROOT/spool/%n
SlurmctldPidFile=$CTLD_PIDFILE
SlurmdPidFile=$ROOT/run/slurmd-%n.pid
SlurmctldLogFile=$ROOT/log/slurmctld.log
SlurmdLogFile=$ROOT/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
# No cgroups on this machine: plain process tracking, no task binding.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
# The nodes' CPUs, memory and GPUs are declared, not probed.
SlurmdParameters=config_overrides
MailProg=/bin/true
JobCompType=jobcomp/filetxt
JobCompLoc=$ROOT/log/jobcomp.txt
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
# Fast turnaround for tests.
KillWait=2
InactiveLimit=0
MinJobAge=300
# What the simulator models: cons_tres on cores and memory, FIFO by submit order, EASY backfill
# every second at one-second resolution.
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1000
GresTypes=gpu
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1,bf_resolution=1
PriorityType=priority/basic
# Job submit hook: only when SLURM_ADVISOR_TESTBED_HOOK points at a job_submit.lua (installed
# beside this file, where Slurm looks for it, by hooks/install.sh).
${SLURM_ADVISOR_TESTBED_HOOK:+JobSubmitPlugins=lua}
NodeName=n[1-4] NodeHostname=localhost NodeAddr=127.0.0.1 Port=[$NODE_PORT-$((NODE_PORT + 3))] CPUs=8 RealMemory=32000 Gres=gpu:4 State=UNKNOWN
PartitionName=batch Nodes=n[1-4] Default=YES MaxTime=INFINITE State=UP
# A second partition over two of the nodes: the advisor must pin a job only to its partition's nodes.
PartitionName=small Nodes=n[1-2] MaxTime=INFINITE State=UP
EOF
    write_topology
    mv "$CONF.new" "$CONF"
    if [ -n "${SLURM_ADVISOR_TESTBED_HOOK:-}" ]; then
        "$(dirname "$0")/../hooks/install.sh" "$ROOT/etc" "$SLURM_ADVISOR_TESTBED_HOOK" >&2 \
            || die "cannot install the job submit hook $SLURM_ADVISOR_TESTBED_HOOK"
    fi
}

write_topology() {
    rm -f "$ROOT/etc/topology.conf" "$ROOT/etc/topology.yaml"
    case "${SLURM_ADVISOR_TESTBED_TOPOLOGY:-}" in
        "") ;;
        block)
            echo "TopologyPlugin=topology/block" >> "$CONF.new"
            printf '%s\n' "BlockName=b1 Nodes=n[1-2]" "BlockName=b2 Nodes=n[3-4]" "BlockSizes=2,4" \
                > "$ROOT/etc/topology.conf" ;;
        block-yaml)
            cat > "$ROOT/etc/topology.yaml" <<EOF
---
- topology: blocks
  cluster_default: true
  block:
    block_sizes: [2, 4]
    blocks:
      - block: b1
        nodes: n[1-2]
      - block: b2
        nodes: n[3-4]
EOF
            ;;
        *) die "SLURM_ADVISOR_TESTBED_TOPOLOGY must be block or block-yaml, not '$SLURM_ADVISOR_TESTBED_TOPOLOGY'" ;;
    esac
}

start_daemons() {
    if [ -z "$(alive "$CTLD_PIDFILE")" ]; then
        # -c: start with no jobs left from an earlier run.
        # The hook (if any) reads its daemon socket and kill switch from slurmctld's environment.
        SLURM_ADVISOR_SOCKET=${SLURM_ADVISOR_TESTBED_SOCKET:-$ROOT/advisor.sock} \
            SLURM_ADVISOR_KILL_SWITCH=$ROOT/advisor.disabled \
            slurmctld -c -f "$CONF" >&2 || die "slurmctld did not start; see $ROOT/log/slurmctld.log"
    fi
    local n
    for n in "${NODES[@]}"; do
        if [ -z "$(alive "$(slurmd_pidfile "$n")")" ]; then
            slurmd -N "$n" -f "$CONF" >&2 || die "slurmd $n did not start; see $ROOT/log/slurmd-$n.log"
        fi
    done
}

wait_idle() {
    local deadline=$((SECONDS + WAIT_S)) states=""
    while [ "$SECONDS" -lt "$deadline" ]; do
        states=$(sinfo -h -N -o '%N %t' 2>/dev/null | sort -u | tr '\n' ' ' || true)
        [ "$states" = "n1 idle n2 idle n3 idle n4 idle " ] && return 0
        sleep 0.5
    done
    die "nodes not all idle after ${WAIT_S}s (sinfo: '${states:-no answer}'); logs in $ROOT/log"
}

start() {
    install_packages
    start_munge
    make_gpus
    if [ -z "$(alive "$CTLD_PIDFILE")" ]; then
        write_config
    elif [ -n "${SLURM_ADVISOR_TESTBED_HOOK:-}" ] && grep -q '^JobSubmitPlugins=lua' "$CONF"; then
        # Never rewrite a live cluster's config, but do bring its hook up to date: slurmctld
        # reloads job_submit.lua at the next submission, and install.sh replaces it atomically.
        "$(dirname "$0")/../hooks/install.sh" "$ROOT/etc" "$SLURM_ADVISOR_TESTBED_HOOK" >&2 \
            || die "cannot install the job submit hook $SLURM_ADVISOR_TESTBED_HOOK"
    fi
    start_daemons
    wait_idle
    echo "export SLURM_CONF=$CONF" | tee "$ROOT/env"
}

stop_pids() {
    # Stop the processes in the given pid files: SIGTERM to all at once, SIGKILL to any still
    # there after 10 s; then remove the files.
    local file pid pids=()
    for file in "$@"; do
        pid=$(alive "$file")
        if [ -n "$pid" ]; then kill -TERM "$pid"; pids+=("$pid"); fi
    done
    for pid in "${pids[@]}"; do
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        if kill -0 "$pid" 2>/dev/null; then log "PID $pid ignored SIGTERM; killing"; kill -KILL "$pid"; fi
    done
    rm -f "$@"
}

stop() {
    if [ -n "$(alive "$CTLD_PIDFILE")" ]; then
        # The testbed's own jobs only (this slurmctld knows no others): no sleep outlives it.
        local ids
        ids=$(squeue -h -o '%i' 2>/dev/null || true)
        if [ -n "$ids" ]; then
            # shellcheck disable=SC2086
            scancel $ids 2>/dev/null || true
            for _ in $(seq 50); do [ -z "$(squeue -h -o '%i' 2>/dev/null)" ] && break; sleep 0.2; done
        fi
    fi
    local n files=()
    for n in "${NODES[@]}"; do files+=("$(slurmd_pidfile "$n")"); done
    stop_pids "${files[@]}" "$CTLD_PIDFILE"
    stop_pids "$MUNGE_PIDFILE"
}

show() {
    # "NAME: running (PID n)" or "NAME: stopped", for the process in pid file $2; fails if stopped.
    local pid
    pid=$(alive "$2")
    if [ -n "$pid" ]; then echo "$1: running (PID $pid)"; else echo "$1: stopped"; return 1; fi
}

status() {
    # Exit status 0 when every daemon runs, 1 otherwise.
    local n rc=0
    show munged "$MUNGE_PIDFILE" || rc=1
    show slurmctld "$CTLD_PIDFILE" || rc=1
    for n in "${NODES[@]}"; do show "slurmd $n" "$(slurmd_pidfile "$n")" || rc=1; done
    if [ -n "$(alive "$CTLD_PIDFILE")" ]; then
        echo "export SLURM_CONF=$CONF"
        sinfo -N -o '%N %t %C %G' || rc=1
    fi
    return "$rc"
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status) status ;;
    *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
