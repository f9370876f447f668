--[[
slurm-advisor's cli_filter.lua (Slurm's cli_filter/lua plugin; Lua 5.1, Slurm 22.05): the
client-side variant of hooks/job_submit.lua. ADVISORY ONLY.

It runs inside the user's own sbatch/salloc/srun, before the job is sent, so users can bypass it
(another SLURM_CONF, their own build of the client commands, or editing their options after it
ran); a site that must place jobs uses job_submit.lua on the controller instead. Enable one of
the two, not both: each would ask the daemon about the same job.

What it does for a job whose --comment carries "slurm-advisor:": the same `advise` exchange as
job_submit.lua (it loads slurm_advisor.lua, the hook's module, so install both side by side in
the Slurm config directory of the login nodes, or point SLURM_ADVISOR_HOOK_LIB at the module), then
  place  --nodelist, --nodes=N, --ntasks, and --export gains SLURM_ADVISOR_LAYOUT / _DECISION
  cap    --nodes=MIN-MAX, and --switches=COUNT@SECONDS when the reply has switches
  none   nothing
and it fails open: any error leaves the options as the user gave them.

The daemon must be reachable from where the user submits: its Unix socket
(SLURM_ADVISOR_SOCKET in the user's environment, default /run/slurm-advisor/advisor.sock) must be
on the login node itself, and the daemon must accept `advise` from ordinary users (the protocol
gives it to root and the Slurm user only: docs/protocol.md). SLURM_ADVISOR_TIMEOUT and
SLURM_ADVISOR_KILL_SWITCH work as for job_submit.lua, read from the user's environment.
]]

local function library_path()
    local path = os.getenv("SLURM_ADVISOR_HOOK_LIB")
    if path and path ~= "" then return path end
    local source = debug.getinfo(1, "S").source     -- "@/etc/slurm/cli_filter.lua"
    local dir = source:match("^@(.*)/[^/]*$") or "."
    return dir .. "/slurm_advisor.lua"
end

local LIBRARY = library_path()
local loaded, library = pcall(dofile, LIBRARY)
local advisor = loaded and type(library) == "table" and library or nil
if advisor == nil then
    slurm.log_error("%s", "slurm-advisor: cli_filter cannot load " .. LIBRARY .. ": "
                          .. tostring(library) .. "; jobs pass unadvised")
end

local NO_VAL = slurm.NO_VAL or 4294967294

-- Slurm prints memory as "4000", "4G", "2T" (megabytes unless a unit follows).
local MEGABYTES = { [""] = 1, K = 1 / 1024, M = 1, G = 1024, T = 1024 * 1024, P = 1024 * 1024 * 1024 }

local function megabytes(value)
    if type(value) ~= "string" then return nil end
    local number, unit = value:match("^(%d+)([KMGTP]?)$")
    if number == nil then return nil end
    return math.ceil(tonumber(number) * MEGABYTES[unit])
end

-- Slurm prints a time limit as "[D-]HH:MM:SS" or "UNLIMITED"; an unset one is NO_VAL minutes.
local function minutes(value)
    if type(value) ~= "string" then return nil end
    local d, h, m = value:match("^(%d+)-(%d+):(%d+):%d+$")
    if d == nil then
        d = 0
        h, m = value:match("^(%d+):(%d+):%d+$")
        if h == nil then return nil end
    end
    local total = tonumber(d) * 1440 + tonumber(h) * 60 + tonumber(m)
    if total >= NO_VAL then return nil end
    return total
end

-- "--nodes" reads "1-0" when unset, else "N" or "MIN-MAX".
local function node_range(value)
    if type(value) ~= "string" or value == "1-0" then return nil, nil end
    local low, high = value:match("^(%d+)-(%d+)$")
    if low == nil then
        low = value:match("^(%d+)$")
        high = low
    end
    return tonumber(low), tonumber(high)
end

local function positive(value, unset)
    local n = tonumber(value)
    if n == nil or n == unset then return nil end
    return n
end

-- The protocol's `job` fields from the client's options (strings, as cli_filter gives them).
local function read_options(options)
    local per_cpu = megabytes(options["mem-per-cpu"])
    local per_node = megabytes(options["mem"])
    local gpus = options["gpus-per-task"]
    local gres = options["gres"]
    local min_nodes, max_nodes = node_range(options["nodes"])
    return {
        { "comment", options["comment"] },
        { "name", options["job-name"] },
        { "user_id", nil },
        { "partition", options["partition"] },
        { "num_tasks", positive(options["ntasks"], 1) },      -- reads 1 when unset
        { "cpus_per_task", positive(options["cpus-per-task"], 0) },  -- reads 0 when unset
        { "pn_min_memory", per_cpu or per_node },
        { "mem_per_cpu", (per_cpu and true) or (per_node and false) or nil },
        { "tres_per_task", gpus and ("gres:gpu:" .. gpus) or nil },
        { "tres_per_node", gres and (gres:find("^gres:") and gres or ("gres:" .. gres)) or nil },
        { "time_limit", minutes(options["time"]) },
        { "min_nodes", min_nodes },
        { "max_nodes", max_nodes },
        { "req_nodes", options["nodelist"] },
    }
end

local function seconds_text(seconds)
    return string.format("%d:%02d:%02d", math.floor(seconds / 3600), math.floor(seconds / 60) % 60, seconds % 60)
end

-- Every option to set, computed before any is set.
local function changes(options, plan)
    local out = {}
    if plan.action == "place" then
        out[#out + 1] = { "nodelist", plan.nodes }
        out[#out + 1] = { "nodes", tostring(plan.nodes_count) }
        out[#out + 1] = { "ntasks", tostring(plan.num_tasks) }
        if plan.segment_size then out[#out + 1] = { "segment", tostring(plan.segment_size) } end
    else
        local low = node_range(options["nodes"]) or 1
        out[#out + 1] = { "nodes", math.min(low, plan.max_nodes) .. "-" .. plan.max_nodes }
        if plan.switches then
            out[#out + 1] = { "switches", plan.switches .. (plan.wait4switch and ("@" .. seconds_text(plan.wait4switch)) or "") }
        end
    end
    local export = options["export"]
    if export ~= "invalid-context" then   -- salloc has no --export
        local vars = "SLURM_ADVISOR_DECISION=" .. plan.decision
        if plan.layout then vars = "'SLURM_ADVISOR_LAYOUT=" .. plan.layout .. "'," .. vars end
        out[#out + 1] = { "export", (export or "ALL") .. "," .. vars }
    end
    return out
end

local function pre_submit(options)
    if advisor == nil then return end
    local comment = options["comment"]
    if type(comment) ~= "string" or not string.find(comment, advisor.MARKER, 1, true) then return end
    local kind = options["type"]
    if kind == "srun" and os.getenv("SLURM_JOB_ID") then return end  -- a step inside an allocation
    if kind ~= "sbatch" and kind ~= "salloc" and kind ~= "srun" then return end
    if advisor.disabled() then return end
    -- -m arbitrary: a node list without one entry per task would give Slurm 23.11+ one task per
    -- node; the job_submit hook pins such a job exactly (hooks/slurm_advisor.lua), not this side
    local distribution = options["distribution"]
    if type(distribution) == "string" and distribution:find("^arbitrary") then return end
    local plan, why = advisor.advise(read_options(options))
    if plan == nil then
        if why then slurm.log_info("%s", "slurm-advisor: " .. why .. "; options left as given") end
        return
    end
    if plan.action == "observe" then return end  -- the client side cannot stamp admin_comment
    for _, change in ipairs(changes(options, plan)) do options[change[1]] = change[2] end
end

function slurm_cli_setup_defaults(options, early_pass)
    return slurm.SUCCESS
end

function slurm_cli_pre_submit(options, pack_offset)
    local ok, err = pcall(pre_submit, options)
    if not ok then slurm.log_error("%s", "slurm-advisor: cli_filter error: " .. tostring(err) .. "; options left as given") end
    return slurm.SUCCESS
end

function slurm_cli_post_submit(offset, job_id, step_id)
    return slurm.SUCCESS
end

return slurm.SUCCESS
