--[[
Test driver for hooks/job_submit.lua and hooks/cli_filter.lua outside Slurm (run by
tests/hooks/test_lua_hooks.py):

  lua5.1 driver.lua submit HOOK CASE        one slurm_job_submit on the job in CASE
  lua5.1 driver.lua modify HOOK CASE        one slurm_job_modify
  lua5.1 driver.lua bench  HOOK CASE N [S]  N slurm_job_submit calls, each on a fresh copy (CASE
                                            may be a list of jobs, taken in turn), S seconds apart
  lua5.1 driver.lua burst  HOOK CASE N [S]  the same, with each call's writes (one Lua state, as
                                            slurmctld's), S seconds apart
  lua5.1 driver.lua cli    HOOK CASE        one slurm_cli_pre_submit (HOOK is cli_filter.lua)

CASE is a Lua file returning the job's fields by their job_submit.lua names (or, for `cli`, the
client's options as strings). The mocked `slurm` table and job descriptor behave as Slurm 22.05's
(src/plugins/job_submit/lua/job_submit_lua.c): unset numbers read as NO_VAL, memory reads through
min_mem_per_cpu / min_mem_per_node, writes are type-checked like luaL_checknumber/checkstring,
and the environment of a job that has none drops writes. One JSON object goes to stdout.
]]

local have_core, core = pcall(require, "socket.core")
local now = have_core and core.gettime or os.clock  -- a test may hide lua-socket from the hook

local NO_VAL, NO_VAL16, NO_VAL64, MEM_PER_CPU = 4294967294, 65534, 2 ^ 64, 2 ^ 63

local logs = {}
local function logger(level)
    return function(fmt, ...) logs[#logs + 1] = level .. ": " .. string.format(fmt, ...) end
end
slurm = {
    SUCCESS = 0, ERROR = -1, FAILURE = -1, NO_VAL = NO_VAL, NO_VAL16 = NO_VAL16, NO_VAL64 = NO_VAL64,
    MEM_PER_CPU = MEM_PER_CPU, log_info = logger("info"), log_error = logger("error"),
    log_verbose = logger("verbose"), log_debug = logger("debug"), log_user = logger("user"),
}

-- The descriptor's fields the hook may write, and the Lua type Slurm's setter checks for.
local WRITABLE = {
    comment = "string", admin_comment = "string", req_nodes = "string", partition = "string",
    num_tasks = "number", min_nodes = "number", max_nodes = "number",
    req_switch = "number", wait4switch = "number",
    segment_size = "number",  -- 26.05+ only (job_submit_lua.c, commit ae5a0d6d77): sent only there
}
local DEFAULTS = {
    num_tasks = NO_VAL, cpus_per_task = NO_VAL16, time_limit = NO_VAL, min_nodes = NO_VAL,
    max_nodes = NO_VAL, req_switch = NO_VAL, wait4switch = NO_VAL, user_id = 0,
}

local function copy(t)
    if type(t) ~= "table" then return t end
    local out = {}
    for k, v in pairs(t) do out[k] = copy(v) end
    return out
end

local function equal(a, b)
    if type(a) ~= "table" or type(b) ~= "table" then return a == b end
    for k, v in pairs(a) do if not equal(v, b[k]) then return false end end
    for k in pairs(b) do if a[k] == nil then return false end end
    return true
end

-- A job_desc proxy over `fields`; every write is appended to `writes` as {name, value}.
local function job_desc(fields, writes)
    local env
    if fields.environment then
        env = setmetatable({}, {
            __index = function(_, name) return fields.environment[name] end,
            __newindex = function(_, name, value)
                assert(type(value) == "string", "environment." .. name .. ": string expected")
                writes[#writes + 1] = { "environment." .. name, value }
                fields.environment[name] = value
            end,
        })
    else  -- not a batch job: Slurm logs and drops the write
        env = setmetatable({}, { __newindex = function(_, name)
            writes[#writes + 1] = { "dropped environment." .. name, true }
        end })
    end
    return setmetatable({}, {
        __index = function(_, name)
            if name == "environment" then return env end
            if name == "min_mem_per_cpu" then return fields.mem_per_cpu end
            if name == "min_mem_per_node" then return fields.mem_per_node end
            if name == "pn_min_memory" then   -- as Slurm pushes it: a double, the flag bit included
                if fields.mem_per_cpu then return MEM_PER_CPU + fields.mem_per_cpu end
                return fields.mem_per_node or NO_VAL64
            end
            local value = fields[name]
            if value == nil then return DEFAULTS[name] end
            return value
        end,
        __newindex = function(_, name, value)
            local kind = WRITABLE[name]
            assert(kind, "_set_job_field: unrecognized or read-only field: " .. tostring(name))
            assert(type(value) == kind, name .. ": " .. kind .. " expected, got " .. type(value))
            writes[#writes + 1] = { name, value }
            fields[name] = value
        end,
    })
end

-- A cli_filter options proxy: strings in, strings out, writes recorded.
local function options(fields, writes)
    return setmetatable({}, {
        __index = function(_, name) return fields[name] end,
        __newindex = function(_, name, value)
            assert(type(value) == "string", name .. ": string expected")
            writes[#writes + 1] = { name, value }
            fields[name] = value
        end,
    })
end

local function encode(v)
    local kind = type(v)
    if kind == "table" then
        local parts = {}
        if #v > 0 or next(v) == nil then
            for i, item in ipairs(v) do parts[i] = encode(item) end
            return "[" .. table.concat(parts, ",") .. "]"
        end
        for k, item in pairs(v) do parts[#parts + 1] = encode(tostring(k)) .. ":" .. encode(item) end
        return "{" .. table.concat(parts, ",") .. "}"
    elseif kind == "string" then
        return '"' .. v:gsub('[%c"\\\128-\255]', function(c) return string.format("\\u%04x", c:byte()) end) .. '"'
    elseif kind == "number" then
        return string.format("%.17g", v)
    end
    return tostring(v)
end

local mode, hook, case, count = arg[1], arg[2], arg[3], tonumber(arg[4] or "1")
local fields = dofile(case)
dofile(hook)

local result = { logs = logs }
if mode == "bench" then
    local total, worst, times = 0, 0, {}
    local pause = tonumber(arg[5] or "0")
    local cases = fields[1] and fields or { fields }  -- a list of jobs: submitted in turn
    for i = 1, count do
        if pause > 0 and have_core then core.sleep(pause) end
        local start = now()
        slurm_job_submit(job_desc(copy(cases[(i - 1) % #cases + 1]), {}), {}, 0)
        local took = now() - start
        total, worst = total + took, math.max(worst, took)
        times[i] = took * 1000
    end
    result.calls, result.mean_ms, result.max_ms, result.times_ms = count, total / count * 1000, worst * 1000, times
    result.logs = { unpack(logs, 1, math.min(#logs, 5)) }
    result.log_count = #logs
elseif mode == "burst" then
    result.calls = {}
    local pause = tonumber(arg[5] or "0")
    for i = 1, count do
        if pause > 0 and have_core then core.sleep(pause) end
        local writes = {}
        slurm_job_submit(job_desc(copy(fields), writes), {}, 0)
        result.calls[i] = writes
    end
else
    local before, writes = copy(fields), {}
    local start, rc = now(), nil
    if mode == "submit" then
        rc = slurm_job_submit(job_desc(fields, writes), {}, 0)
    elseif mode == "modify" then
        rc = slurm_job_modify(job_desc(fields, writes), {}, {}, 0)
    elseif mode == "cli" then
        rc = slurm_cli_pre_submit(options(fields, writes), 0)
    else
        error("unknown mode " .. tostring(mode))
    end
    result.elapsed_ms = (now() - start) * 1000
    result.rc, result.writes, result.after = rc, writes, fields
    result.unchanged = equal(before, fields)
end
io.write(encode(result), "\n")
