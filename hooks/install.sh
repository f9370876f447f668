#!/usr/bin/env bash
# Install slurm-advisor's job submit hook into a Slurm config directory, checked and atomically:
#
#   hooks/install.sh [--chain | --replace] DEST_DIR [SOURCE]
#
# SOURCE is the standalone job_submit.lua (default: the one beside this script); the module
# slurm_advisor.lua is taken from SOURCE's directory. Always installs DEST_DIR/slurm_advisor.lua;
# then, for DEST_DIR/job_submit.lua:
#   none there            installs the standalone script (it calls the module for every job);
#   slurm-advisor's own   replaces it (an upgrade);
#   the site's, chained   leaves it as it is and touches it, so slurmctld reloads the new module;
#   the site's own        refuses, changing nothing, and prints the one line to add, unless
#     --chain               the line is added at its end (before a final `return`): the site's
#                           slurm_job_submit runs first, the advisor after it; or
#     --replace             the standalone script replaces it.
#   Either way the site's script is first copied to job_submit.lua.bak.<UTC time> beside it.
#
# A script that does not load when slurmctld starts stops slurmctld (and a running slurmctld
# reloads job_submit.lua whenever its mtime changes), so nothing is written unless every file to
# be installed passes `luac5.1 -p` and loads under lua5.1 with a stub `slurm` table (both from
# Debian's lua5.1 package) as it will be used: the module returns the hook, the standalone script
# or the chained site script defines slurm_job_submit and slurm_job_modify, and the chain line
# ran. Each file is copied beside its target and renamed over it (one rename on one filesystem:
# slurmctld sees the old file or the new one, never half of one). On any failure: exit 1 with
# one message. Last, what slurm.conf beside it says of JobSubmitPlugins is checked and reported
# (this script never edits slurm.conf). slurmctld compares whole-second mtimes: two installs
# within one second may not both be seen.
set -euo pipefail

die() { printf 'install.sh: %s\n' "$*" >&2; exit 1; }
usage() { echo "usage: $0 [--chain | --replace] DEST_DIR [SOURCE]" >&2; exit 2; }

ACTION=
while [ $# -gt 0 ]; do
    case $1 in
        --chain|--replace) [ -z "$ACTION" ] || usage; ACTION=${1#--}; shift ;;
        --help|-h) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        -*) usage ;;
        *) break ;;
    esac
done
[ $# -ge 1 ] && [ $# -le 2 ] || usage
[ -d "$1" ] || die "$1 is not a directory"
DEST=$(cd "$1" && pwd)
SOURCE=${2:-$(dirname "$0")/job_submit.lua}
[ -f "$SOURCE" ] || die "$SOURCE: no such file"
MODULE_SOURCE=$(dirname "$SOURCE")/slurm_advisor.lua
[ -f "$MODULE_SOURCE" ] || die "$MODULE_SOURCE: no such file (the module goes beside $SOURCE)"
SCRIPT=$DEST/job_submit.lua
MODULE=$DEST/slurm_advisor.lua
# The line a site's script gets: it never stops the site's script from loading.
LINE="local ok, err = pcall(function() dofile(\"$MODULE\").chain() end) if not ok then slurm.log_error(\"slurm-advisor: %s\", tostring(err)) end"
OURS_TAG="slurm-advisor's standalone job_submit.lua"
OURS_BEFORE="slurm-advisor's job_submit.lua (Slurm's job_submit/lua plugin"  # the single-file hook of earlier releases

LUAC=$(command -v luac5.1 || command -v luac || true)
LUA=$(command -v lua5.1 || true)
[ -n "$LUAC" ] && [ -n "$LUA" ] || die "luac5.1/lua5.1 not found (Debian: apt-get install lua5.1); nothing installed"

# check FILE ROLE: syntax, then a load as slurmctld would (top-level code runs once) with only the
# names Slurm provides; loading the module by its installed path reads MODULE_SOURCE instead.
check() {
    local said
    said=$("$LUAC" -p "$1" 2>&1) || die "$1 fails the syntax check, nothing installed: ${said%%$'\n'*}"
    said=$(SLURM_ADVISOR_SOCKET= SLURM_ADVISOR_TIMEOUT= SLURM_ADVISOR_KILL_SWITCH= \
           "$LUA" - "$1" "$2" "$MODULE" "$(cd "$(dirname "$MODULE_SOURCE")" && pwd)/slurm_advisor.lua" 2>&1 <<'LUA'
local file, role, installed, source = arg[1], arg[2], arg[3], arg[4]
local errors = {}
local function log() end
slurm = setmetatable({ SUCCESS = 0, ERROR = -1, FAILURE = -1, NO_VAL = 4294967294, NO_VAL16 = 65534,
                       NO_VAL64 = 2^64, log_info = log, log_verbose = log, log_debug = log, log_user = log,
                       log_error = function(fmt, ...) errors[#errors + 1] = string.format(fmt, ...) end },
                     { __index = function() return log end })   -- names a site's script may read at load
local chained = false
local real_dofile = dofile
dofile = function(path)
    if path ~= installed then return real_dofile(path) end
    local module = real_dofile(source)
    local chain = module.chain
    module.chain = function(...) chain(...) chained = true end
    return module
end
local rc = real_dofile(file)
if role == "module" then
    assert(type(rc) == "table" and type(rc.job_submit) == "function" and type(rc.chain) == "function",
           "it does not return the hook (job_submit, chain)")
    return
end
assert(rc == nil or rc == slurm.SUCCESS, "the script returns " .. tostring(rc) .. " on load")
assert(type(slurm_job_submit) == "function", "no slurm_job_submit")
assert(type(slurm_job_modify) == "function", "no slurm_job_modify")
assert(#errors == 0 or errors[1]:find("lua%-socket"), errors[1])
assert(role ~= "chained" or chained, "the slurm-advisor line did not run (" .. (errors[1] or "?") .. ")")
LUA
) || die "$1 does not load, nothing installed: ${said%%$'\n'*}"
}

# put FILE TARGET: copy beside TARGET, then rename over it.
put() {
    local tmp
    tmp=$(dirname "$2")/.$(basename "$2").tmp.$$
    cp "$1" "$tmp" || { rm -f "$tmp"; die "cannot write $tmp"; }
    chmod 0644 "$tmp"
    mv -f "$tmp" "$2" || { rm -f "$tmp"; die "cannot rename $tmp to $2"; }
}

backup() {
    local copy
    copy=$SCRIPT.bak.$(date -u +%Y%m%dT%H%M%SZ)
    cp -p "$SCRIPT" "$copy" || die "cannot back up $SCRIPT to $copy; nothing changed"
    echo "kept the site's script as $copy"
}

# The site's script with the line added at its end, or before a final top-level `return`
# (Lua allows nothing after it).
chained_copy() {
    awk -v line="$LINE" '
        { text[NR] = $0 }
        END {
            last = NR
            while (last > 0 && text[last] ~ /^[ \t]*(--.*)?$/) last--
            at = (last > 0 && text[last] ~ /^return([ \t(]|$)/) ? last : NR + 1
            for (i = 1; i < at; i++) print text[i]
            print "-- slurm-advisor (hooks/install.sh --chain): runs after slurm_job_submit above"
            print line
            for (i = at; i <= NR; i++) print text[i]
        }' "$SCRIPT"
}

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

check "$MODULE_SOURCE" module
if [ ! -e "$SCRIPT" ]; then
    plan=standalone
elif grep -qF -e "$OURS_TAG" -e "$OURS_BEFORE" "$SCRIPT"; then
    plan=standalone
elif grep -qF "dofile(\"$MODULE\").chain()" "$SCRIPT"; then
    plan=touch
elif [ "$ACTION" = chain ]; then
    plan=chain
elif [ "$ACTION" = replace ]; then
    plan=replace
else
    die "$SCRIPT is the site's own; nothing installed. Add this line at its end (after slurm_job_submit,
before a final return), or rerun with --chain to have it added (a backup is kept), or with --replace:
$LINE"
fi

case $plan in
    standalone|replace) check "$SOURCE" standalone ;;
    chain) chained_copy > "$WORK/job_submit.lua"; check "$WORK/job_submit.lua" chained ;;
    touch) check "$SCRIPT" chained ;;
esac

put "$MODULE_SOURCE" "$MODULE"
echo "installed $MODULE"
case $plan in
    standalone) put "$SOURCE" "$SCRIPT"; echo "installed $SCRIPT (standalone)" ;;
    replace) backup; put "$SOURCE" "$SCRIPT"; echo "installed $SCRIPT (standalone, replacing the site's)" ;;
    chain) backup; put "$WORK/job_submit.lua" "$SCRIPT"; echo "added slurm-advisor to $SCRIPT (after the site's slurm_job_submit)" ;;
    touch) touch "$SCRIPT"; echo "$SCRIPT already calls the module; touched it so that slurmctld reloads" ;;
esac

# slurm.conf beside it: reported, never edited (Slurm's keys are case-insensitive).
CONF=$DEST/slurm.conf
if [ -f "$CONF" ]; then
    plugins=$(grep -iE '^[[:space:]]*JobSubmitPlugins[[:space:]]*=' "$CONF" | tail -n 1 | sed 's/^[^=]*=[[:space:]]*//; s/[[:space:]#].*$//' || true)
    if [ -z "$plugins" ]; then
        echo "slurm.conf: add the line JobSubmitPlugins=lua, then: scontrol reconfigure"
    elif printf '%s\n' "$plugins" | tr ',' '\n' | grep -qx -e lua -e job_submit/lua; then
        echo "slurm.conf: JobSubmitPlugins=$plugins already includes lua"
    else
        echo "slurm.conf: add lua to the existing line: JobSubmitPlugins=$plugins,lua, then: scontrol reconfigure"
    fi
fi
