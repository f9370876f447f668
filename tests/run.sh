#!/usr/bin/env bash
# The one command that sets up and runs the tests (CI runs it through .ci/run):
#
#   bash tests/run.sh [pytest args...]
#
# On a fresh Debian 12 machine, as root: creates .venv, installs the CPU build of torch first
# (an unpinned torch would pull GBs of CUDA), then the package with its dev extra (which takes in
# the train extra's torch range: the pinned build satisfies it); installs and
# starts a private PostgreSQL for the store's integration test, and the Slurm testbed
# (.ci/slurm-testbed.sh: slurmctld + 4 slurmd on localhost) for tests/integration; both are
# stopped by their PIDs on exit; installs promtool (Debian's prometheus package, no server
# started) for the monitoring examples; then ruff, promtool and pytest. Then the Slurm tests
# (pytest -m slurm: tests/integration, the hook's and the source's live tests) once more against
# a newer Slurm: a second testbed inside a Debian chroot (.ci/slurm-chroot.sh; built once per
# machine, about a minute, then cached), by default trixie's Slurm 24.11;
# SLURM_ADVISOR_CI_MODERN=sid tests 26.05 instead, =none skips the pass.
# benchmarks/slurm_releases.py runs them on all three releases. Safe to run again: each step
# skips what is already done.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
TORCH=torch==2.13.0
VENV=.venv
PY=$VENV/bin/python
MODERN=${SLURM_ADVISOR_CI_MODERN:-trixie}
# What runs against the newer Slurm: every test that talks to a real Slurm (-m slurm selects them)
SLURM_TESTS=(tests/integration tests/hooks/test_job_submit_live.py tests/cluster/test_slurm_cli_live.py
             tests/test_site_install.py)  # its slurm-marked test: the README install on trixie

step() { printf '== %s\n' "$*"; }

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

setup_python() {
    if [ ! -x "$PY" ]; then
        step "creating $VENV"
        python3 -m venv "$VENV"
    fi
    # Reinstall only when the package metadata changed (the install is editable: code needs none).
    local stamp="$VENV/.slurm-advisor-installed" want
    want=$(cat setup.cfg pyproject.toml tests/run.sh | sha256sum | cut -d' ' -f1)
    if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
        step "installing $TORCH, then slurm-advisor[dev]"
        "$PY" -m pip install -q "$TORCH"
        "$PY" -m pip install -q -e ".[dev]"
        echo "$want" > "$stamp"
    fi
}

setup_postgres() {
    if ! compgen -G "/usr/lib/postgresql/*/bin/pg_ctl" > /dev/null; then
        step "installing PostgreSQL"
        # No system-wide "main" cluster: the tests run their own, private one (postgres.sh).
        as_root mkdir -p /etc/postgresql-common
        echo "create_main_cluster = false" | as_root tee /etc/postgresql-common/createcluster.conf > /dev/null
        as_root apt-get update -qq
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
            -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold postgresql > /dev/null
    fi
    step "starting PostgreSQL"
    SLURM_ADVISOR_TEST_PG_URL=$(.ci/postgres.sh start)
    export SLURM_ADVISOR_TEST_PG_URL
}

setup_slurm() {
    # The testbed installs its Debian packages itself when they are missing.
    step "starting the Slurm testbed"
    local exports
    # With the advisor's job submit hook: it acts only on jobs that carry the marker, and fails open.
    exports=$(SLURM_ADVISOR_TESTBED_HOOK=hooks/job_submit.lua .ci/slurm-testbed.sh start)  # apart from eval: a failed start stops the run
    eval "$exports"                        # export SLURM_CONF=...
    export SLURM_ADVISOR_TEST_SLURM=1
}

setup_promtool() {
    # promtool checks the alert rules in examples/monitoring; on Debian 12 it comes with the
    # prometheus package (/usr/bin/promtool). Its postinst starts a Prometheus server through
    # invoke-rc.d: a policy-rc.d that answers 101 ("action forbidden") for the install keeps it
    # from starting (one already there, as in Docker images, is left as it is), and where
    # systemd runs, the unit the package enables is disabled again. Only promtool is used.
    command -v promtool > /dev/null && return
    step "installing promtool (Debian's prometheus package; no server started)"
    local policy=/usr/sbin/policy-rc.d placed=
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' | as_root tee "$policy" > /dev/null
        as_root chmod 755 "$policy"
        placed=1
    fi
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus > /dev/null \
        || { [ -z "$placed" ] || as_root rm -f "$policy"; return 1; }
    [ -z "$placed" ] || as_root rm -f "$policy"
    if [ -d /run/systemd/system ]; then
        as_root systemctl disable --now prometheus.service > /dev/null 2>&1 || true
    fi
}

setup_modern_slurm() {
    step "starting the Slurm testbed in the $MODERN chroot"
    SLURM_ADVISOR_VENV=$PWD/$VENV SLURM_ADVISOR_TESTBED_HOOK=hooks/job_submit.lua \
        .ci/slurm-chroot.sh start "$MODERN" > /dev/null
}

stop_services() {
    [ "$MODERN" = none ] || SLURM_ADVISOR_VENV=$PWD/$VENV .ci/slurm-chroot.sh stop "$MODERN" || true
    .ci/slurm-testbed.sh stop || true
    .ci/postgres.sh stop || true
}

setup_python
setup_promtool
trap stop_services EXIT  # set before either starts: a start that fails half-way is stopped too
setup_postgres
setup_slurm
[ "$MODERN" = none ] || setup_modern_slurm
step "ruff"
"$VENV/bin/ruff" check -q slurm_advisor tests benchmarks
step "promtool"
promtool check rules examples/monitoring/prometheus-rules.yml
promtool test rules examples/monitoring/rules-test.yml
step "pytest"
"$VENV/bin/pytest" -q "$@"
if [ "$MODERN" != none ]; then
    step "pytest -m slurm on $(.ci/slurm-chroot.sh run "$MODERN" sinfo --version)"
    SLURM_ADVISOR_VENV=$PWD/$VENV .ci/slurm-chroot.sh run "$MODERN" \
        env SLURM_ADVISOR_TEST_SLURM=1 "$VENV/bin/pytest" -q -m slurm -p no:cacheprovider "${SLURM_TESTS[@]}"
fi
