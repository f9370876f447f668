#!/usr/bin/env bash
# Install slurm-advisor's job_submit.lua into a Slurm config directory, atomically:
#
#   hooks/install.sh DEST_DIR [SOURCE]     # SOURCE defaults to the job_submit.lua beside this script
#
# A script that does not load when slurmctld starts stops slurmctld (and a running slurmctld
# reloads the file whenever its mtime changes), so nothing is installed unless SOURCE passes
# `luac5.1 -p` and loads under lua5.1 with a stub `slurm` table (both from Debian's lua5.1
# package) and defines slurm_job_submit and slurm_job_modify. It is then copied to
# DEST_DIR/.job_submit.lua.tmp.$$ and renamed over DEST_DIR/job_submit.lua (one rename on one
# filesystem: slurmctld sees the old file or the new one, never half of one). On any failure:
# exit 1 with one message, the old script left as it was.
# slurmctld compares whole-second mtimes: two installs within one second may not both be seen.
set -euo pipefail

die() { printf 'install.sh: %s\n' "$*" >&2; exit 1; }

[ $# -ge 1 ] && [ $# -le 2 ] || { echo "usage: $0 DEST_DIR [SOURCE]" >&2; exit 2; }
DEST=$1
SOURCE=${2:-$(dirname "$0")/job_submit.lua}
[ -d "$DEST" ] || die "$DEST is not a directory"
[ -f "$SOURCE" ] || die "$SOURCE: no such file"

LUAC=$(command -v luac5.1 || command -v luac || true)
LUA=$(command -v lua5.1 || true)
[ -n "$LUAC" ] && [ -n "$LUA" ] || die "luac5.1/lua5.1 not found (Debian: apt-get install lua5.1); nothing installed"

said=$("$LUAC" -p "$SOURCE" 2>&1) || die "$SOURCE fails the syntax check, nothing installed: ${said%%$'\n'*}"
# Load it as slurmctld would (top-level code runs once), with only the names Slurm provides.
said=$(SLURM_ADVISOR_SOCKET= SLURM_ADVISOR_TIMEOUT= SLURM_ADVISOR_KILL_SWITCH= "$LUA" - "$SOURCE" 2>&1 <<'LUA'
local function log() end
slurm = { SUCCESS = 0, ERROR = -1, NO_VAL = 4294967294, NO_VAL16 = 65534, NO_VAL64 = 2^64,
          log_info = log, log_error = log, log_verbose = log, log_debug = log, log_user = log }
local rc = dofile(arg[1])
assert(rc == nil or rc == slurm.SUCCESS, "the script returns " .. tostring(rc) .. " on load")
assert(type(slurm_job_submit) == "function", "no slurm_job_submit")
assert(type(slurm_job_modify) == "function", "no slurm_job_modify")
LUA
) || die "$SOURCE does not load, nothing installed: ${said%%$'\n'*}"

TMP=$DEST/.job_submit.lua.tmp.$$
trap 'rm -f "$TMP"' EXIT
cp "$SOURCE" "$TMP" || die "cannot write $TMP"
chmod 0644 "$TMP"
mv -f "$TMP" "$DEST/job_submit.lua" || die "cannot rename $TMP to $DEST/job_submit.lua"
trap - EXIT
echo "installed $DEST/job_submit.lua"
