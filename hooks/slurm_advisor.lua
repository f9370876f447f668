--[[
slurm-advisor's job submit hook as a Lua module (Slurm's job_submit/lua plugin; Lua 5.1; Slurm
22.05, 24.11, 26.05). It defines no Slurm callbacks itself: it returns a table whose job_submit
is the whole hook for one job. Two ways in, both installed by hooks/install.sh:

  * a site without a job_submit.lua of its own: hooks/job_submit.lua, which loads this file from
    its own directory and calls it for every job;
  * a site with one (partition routing, QOS, limits...): one line at the end of that script,

      local ok, err = pcall(function() dofile("/etc/slurm/slurm_advisor.lua").chain() end) if not ok then slurm.log_error("slurm-advisor: %s", tostring(err)) end

    chain() wraps the script's slurm_job_submit: the site's function runs first, unchanged, and
    the advisor runs after it only when it returned success, so it sees the partition, QOS and
    every field the site's code set, and a job the site rejects is never advised.

slurmctld runs this inside its locks: every millisecond here blocks the whole controller. So:
  * a job whose --comment lacks "slurm-advisor:" returns at once, untouched, with no I/O at all;
  * for a marked job: one `advise` request to the daemon (docs/protocol.md), one line out, one
    line back, the whole exchange bounded by TIMEOUT_S -- unless the daemon has the answer ready:
    for requests it has seen before it writes their answers ahead to SOCKET .. ".ready" (JSON
    lines, read here with no round trip), and the hook that uses one tells the daemon with one
    datagram to SOCKET .. ".taken" (no reply awaited). An answer is used only from a file that
    counts every answer this hook used before (see ready_answer), so no two jobs get the same
    nodes; anything wrong with the file and the hook asks over the socket;
  * the reply is checked in full before any field is written (a field written before a Lua
    error would be kept), and anything wrong -- no daemon, a timeout, a bad or refused reply,
    a bug here -- lets the job through unmodified, with one log line. The advisor never rejects
    a job: job_submit always returns slurm.SUCCESS. Nothing reaches a shell (no os.execute, io.popen).

Settings (slurmctld's own environment overrides each):
  SLURM_ADVISOR_SOCKET       the daemon's Unix socket   (/run/slurm-advisor/advisor.sock)
  SLURM_ADVISOR_TIMEOUT      seconds for the exchange    (0.2)
  SLURM_ADVISOR_KILL_SWITCH  while this file exists the hook does nothing (/etc/slurm-advisor/disabled)
  SLURM_ADVISOR_BACKOFF      after an exchange that used half the timeout or more and failed, no
                             exchange for this many seconds (5; 0: never back off), so that a
                             hung daemon costs the controller TIMEOUT_S once, not on every job

slurmctld reloads job_submit.lua when its mtime changes, not this file: install.sh touches
job_submit.lua after replacing this one. Needs lua-socket (Debian: lua-socket); without it every
job passes unmodified and slurmctld logs why. hooks/cli_filter.lua loads this file as a library.
]]

local DEFAULT_SOCKET = "/run/slurm-advisor/advisor.sock"
local DEFAULT_TIMEOUT_S = 0.2
local DEFAULT_KILL_SWITCH = "/etc/slurm-advisor/disabled"
local DEFAULT_BACKOFF_S = 5

local MARKER = "slurm-advisor:"
local MAX_LINE = 64 * 1024          -- the protocol's limit on one line, either way
local MAX_INT = 2147483647          -- every count the reply carries fits a C int

local function setting(name, default)
    local value = os.getenv(name)
    if value == nil or value == "" then return default end
    return value
end

local SOCKET = setting("SLURM_ADVISOR_SOCKET", DEFAULT_SOCKET)
local KILL_SWITCH = setting("SLURM_ADVISOR_KILL_SWITCH", DEFAULT_KILL_SWITCH)
local function seconds_setting(name, default, low, high)
    local value = tonumber(setting(name, default))
    if value == nil or value < low or value > high then
        slurm.log_error("%s", "slurm-advisor: " .. name .. " must be seconds in [" .. low .. ", " .. high
                              .. "]; using " .. default)
        return default
    end
    return value
end

local TIMEOUT_S = seconds_setting("SLURM_ADVISOR_TIMEOUT", DEFAULT_TIMEOUT_S, 0.001, 10)
local BACKOFF_S = seconds_setting("SLURM_ADVISOR_BACKOFF", DEFAULT_BACKOFF_S, 0, 3600)

local have_socket, unix = pcall(require, "socket.unix")
local have_core, core = pcall(require, "socket.core")
local SOCKET_MISSING = nil
if not (have_socket and have_core) then
    local why = tostring(have_socket and core or unix):gsub("%s+", " "):sub(1, 300)
    SOCKET_MISSING = "lua-socket not available (" .. why .. ")"
    slurm.log_error("%s", "slurm-advisor: " .. SOCKET_MISSING .. "; every job passes unmodified")
end

local NO_VAL = slurm.NO_VAL or 4294967294
local NO_VAL16 = slurm.NO_VAL16 or 65534

-- What a log line may quote of untrusted text: printable, one line, short.
local function quote(text)
    text = tostring(text)
    if #text > 200 then text = text:sub(1, 200) .. "..." end
    return (text:gsub("[%c\128-\255]", "?"))
end

------------------------------------------------------------------------------------------------
-- JSON: an encoder for objects of strings, numbers, booleans and null (and the request's one
-- nested object, `job`); a decoder for the flat reply object. Both refuse what they do not handle rather than guess.

-- Raise `message` without a file:line prefix (it is logged as the reason).
local function fail(message) error(message, 0) end

local ESCAPES = { ['"'] = '\\"', ['\\'] = '\\\\', ['\b'] = '\\b', ['\f'] = '\\f',
                  ['\n'] = '\\n', ['\r'] = '\\r', ['\t'] = '\\t' }

local function encode_string(s)
    return '"' .. s:gsub('[%c"\\]', function(c)
        return ESCAPES[c] or string.format("\\u%04x", c:byte())
    end) .. '"'
end

local function encode_value(v)
    local kind = type(v)
    if v == nil then return "null" end
    if kind == "boolean" then return tostring(v) end
    if kind == "string" then return encode_string(v) end
    if kind == "number" then
        if v ~= v or v == math.huge or v == -math.huge then return "null" end
        if v == math.floor(v) and math.abs(v) < 2^53 then return string.format("%d", v) end
        return string.format("%.17g", v)
    end
    fail("cannot encode a " .. kind)
end

-- A value encoded already: a job's fields are encoded once for its ready key, note and request.
local ENCODED = {}
local function encoded(text) return setmetatable({ text }, ENCODED) end

local encode_object

-- Each field's `"name":value`, in order. `fields` is a list of {name, value} so that nil values
-- stay (as null) and the order is kept; a value may be a nested list or `encoded` text.
local function encode_parts(fields)
    local parts = {}
    for i, field in ipairs(fields) do
        local value = field[2]
        if type(value) ~= "table" then
            value = encode_value(value)
        elseif getmetatable(value) == ENCODED then
            value = value[1]
        else
            value = encode_object(value)
        end
        parts[i] = encode_string(field[1]) .. ":" .. value
    end
    return parts
end

encode_object = function(fields) return "{" .. table.concat(encode_parts(fields), ",") .. "}" end

local UNESCAPES = { ['"'] = '"', ['\\'] = '\\', ['/'] = '/', b = '\b', f = '\f', n = '\n', r = '\r', t = '\t' }

local function utf8_char(code)
    if code < 0x80 then return string.char(code) end
    if code < 0x800 then return string.char(0xC0 + math.floor(code / 64), 0x80 + code % 64) end
    if code < 0x10000 then
        return string.char(0xE0 + math.floor(code / 4096), 0x80 + math.floor(code / 64) % 64, 0x80 + code % 64)
    end
    return string.char(0xF0 + math.floor(code / 262144), 0x80 + math.floor(code / 4096) % 64,
                       0x80 + math.floor(code / 64) % 64, 0x80 + code % 64)
end

local function decode_string(s, i)  -- s:sub(i, i) is the opening quote
    local out, pos = {}, i + 1
    while true do
        local j = s:find('[%c"\\]', pos)
        if j == nil then fail("unterminated string") end
        out[#out + 1] = s:sub(pos, j - 1)
        local c = s:sub(j, j)
        if c == '"' then return table.concat(out), j + 1 end
        if c ~= "\\" then fail("control character in a string") end
        local e = s:sub(j + 1, j + 1)
        if UNESCAPES[e] then
            out[#out + 1] = UNESCAPES[e]
            pos = j + 2
        elseif e == "u" then
            local hex = s:match("^%x%x%x%x", j + 2)
            if hex == nil then fail("bad \\u escape") end
            local code = tonumber(hex, 16)
            pos = j + 6
            if code >= 0xD800 and code <= 0xDBFF then  -- a surrogate pair: one code point
                local low = s:match("^\\u([dD][c-fC-F]%x%x)", pos)
                if low == nil then fail("lone surrogate \\u escape") end
                code = 0x10000 + (code - 0xD800) * 1024 + (tonumber(low, 16) - 0xDC00)
                pos = pos + 6
            elseif code >= 0xDC00 and code <= 0xDFFF then
                fail("lone surrogate \\u escape")
            end
            out[#out + 1] = utf8_char(code)
        else
            fail("bad escape \\" .. e)
        end
    end
end

local function decode_number(s, i)
    local int = s:match("^-?%d+", i)
    if int == nil or int:match("^-?0%d") then fail("bad number") end
    local j = i + #int
    local frac = s:match("^%.%d+", j)
    if frac then j = j + #frac end
    local exp = s:match("^[eE][-+]?%d+", j)
    if exp then j = j + #exp end
    return tonumber(s:sub(i, j - 1)), j
end

local LITERALS = { t = { "true", true }, f = { "false", false }, n = { "null", nil } }

local function decode_value(s, i)
    local c = s:sub(i, i)
    if c == '"' then return decode_string(s, i) end
    if c == "-" or c:match("%d") then return decode_number(s, i) end
    local literal = LITERALS[c]
    if literal and s:sub(i, i + #literal[1] - 1) == literal[1] then return literal[2], i + #literal[1] end
    fail("unexpected " .. (c == "" and "end of line" or quote(c)) .. " (the reply must be a flat object)")
end

-- The flat object in `s`: {name = value}; JSON null reads as absent. Errors name the problem.
local function decode_flat(s)
    local obj, seen = {}, {}
    local i = s:find("[^ \t\r\n]")
    if i == nil or s:sub(i, i) ~= "{" then fail("not a JSON object") end
    i = s:find("[^ \t\r\n]", i + 1) or #s + 1
    if s:sub(i, i) == "}" then
        i = i + 1
    else
        while true do
            if s:sub(i, i) ~= '"' then fail("expected a key") end
            local key, value
            key, i = decode_string(s, i)
            i = s:find("[^ \t\r\n]", i) or #s + 1
            if s:sub(i, i) ~= ":" then fail("expected ':'") end
            i = s:find("[^ \t\r\n]", i + 1) or #s + 1
            value, i = decode_value(s, i)
            if seen[key] then fail("duplicate key " .. quote(key)) end
            seen[key], obj[key] = true, value
            i = s:find("[^ \t\r\n]", i) or #s + 1
            local c = s:sub(i, i)
            i = s:find("[^ \t\r\n]", i + 1) or #s + 1
            if c == "}" then break end
            if c ~= "," then fail("expected ',' or '}'") end
        end
    end
    if s:find("[^ \t\r\n]", i) then fail("text after the object") end
    return obj
end

------------------------------------------------------------------------------------------------
-- The exchange: connect, send one line, read one line, all before one deadline.

local function read_line(sock, deadline)
    local chunks, total = {}, 0
    while true do
        local left = deadline - core.gettime()
        if left <= 0 then return nil, "no reply within " .. TIMEOUT_S .. " s" end
        sock:settimeout(left)
        local first, err = sock:receive(1)                -- wait for the next byte, at most `left`
        if first == nil then
            if err == "closed" then return nil, "the daemon closed the connection without a reply" end
            if err == "timeout" then return nil, "no reply within " .. TIMEOUT_S .. " s" end
            return nil, "receive: " .. tostring(err)
        end
        sock:settimeout(0)                                -- then take what is there, at most the cap
        local rest, err2, partial = sock:receive(MAX_LINE - total)
        local chunk = first .. (rest or partial or "")
        chunks[#chunks + 1] = chunk
        total = total + #chunk
        local newline = chunk:find("\n", 1, true)
        if newline then
            if newline ~= #chunk then return nil, "text after the reply line" end
            return table.concat(chunks):sub(1, -2)
        end
        if total >= MAX_LINE then return nil, "reply longer than " .. MAX_LINE .. " bytes" end
        if err2 == "closed" then return nil, "the daemon closed the connection mid-line" end
    end
end

local quiet_until = 0  -- no exchange before this time (set after a slow failure)

local function exchange(line)
    if SOCKET_MISSING then return nil, SOCKET_MISSING end
    local started = core.gettime()
    if started < quiet_until then
        return nil, string.format("backing off for %.1f s more after a slow failure", quiet_until - started)
    end
    local deadline = started + TIMEOUT_S
    local sock, err = unix.stream()
    if sock == nil then return nil, "socket: " .. tostring(err) end
    local ok, reply, why = pcall(function()
        sock:settimeout(math.max(deadline - core.gettime(), 0))
        local connected, cerr = sock:connect(SOCKET)
        if not connected then return nil, "connect " .. SOCKET .. ": " .. tostring(cerr) end
        sock:settimeout(math.max(deadline - core.gettime(), 0))
        local sent, serr = sock:send(line)
        if not sent then return nil, "send: " .. tostring(serr) end
        return read_line(sock, deadline)
    end)
    sock:close()
    if not ok then reply, why = nil, "client error: " .. tostring(reply) end
    if reply == nil and BACKOFF_S > 0 and core.gettime() - started >= TIMEOUT_S / 2 then
        quiet_until = core.gettime() + BACKOFF_S
    end
    return reply, why
end

------------------------------------------------------------------------------------------------
-- The request from the job descriptor, and the reply checked into a plan.

local function unset_as_nil(value, sentinel)
    if type(value) ~= "number" or value == sentinel then return nil end
    return value
end

local function text(value)
    if type(value) ~= "string" then return nil end
    return value
end

local function number(value)
    if type(value) ~= "number" then return nil end
    return value
end

-- Whether the job was submitted with -m arbitrary: job_desc has no task_dist field on any release
-- (job_submit_lua.c), but sbatch writes its req_nodes, as sent, into the job's environment as
-- SLURM_ARBITRARY_NODELIST (sbatch.c, 22.05 to 26.05), and slurmd lays the batch step out from
-- it. Equal to req_nodes: this submission's, not one inherited from a parent job's environment
-- (sbatch without -m arbitrary also removes the list's repeats). nil for a job with no environment.
local function submitted_arbitrary(job_desc)
    local env = job_desc.environment
    if env == nil then return nil end
    local list = env.SLURM_ARBITRARY_NODELIST
    if type(list) ~= "string" or list == "" then return nil end
    return list == job_desc.req_nodes
end

-- The protocol's `job` fields from a job_desc (Slurm's proxy or any table with its field names).
local function read_job(job_desc)
    -- min_mem_per_cpu/_node come without Slurm's MEM_PER_CPU bit; pn_min_memory holds it in a
    -- 64-bit number that a Lua double cannot carry exactly.
    local mem, per_cpu = job_desc.min_mem_per_cpu, nil
    if type(mem) == "number" then
        per_cpu = true
    else
        mem = job_desc.min_mem_per_node
        if type(mem) == "number" then per_cpu = false else mem = nil end
    end
    return {
        { "comment", text(job_desc.comment) },
        { "name", text(job_desc.name) },
        { "user_id", unset_as_nil(job_desc.user_id, NO_VAL) },
        { "partition", text(job_desc.partition) },
        { "num_tasks", unset_as_nil(job_desc.num_tasks, NO_VAL) },
        { "cpus_per_task", unset_as_nil(job_desc.cpus_per_task, NO_VAL16) },
        { "pn_min_memory", mem },
        { "mem_per_cpu", per_cpu },
        { "tres_per_task", text(job_desc.tres_per_task) },
        { "tres_per_node", text(job_desc.tres_per_node) },
        { "time_limit", unset_as_nil(job_desc.time_limit, NO_VAL) },
        { "min_nodes", unset_as_nil(job_desc.min_nodes, NO_VAL) },
        { "max_nodes", unset_as_nil(job_desc.max_nodes, NO_VAL) },
        { "req_nodes", text(job_desc.req_nodes) },
        -- Everything else that constrains where the job may run (slurm_advisor/slurm/request.py
        -- models or refuses each). Numbers go as Slurm holds them: the daemon reads its NO_VAL
        -- sentinels as unset.
        { "exc_nodes", text(job_desc.exc_nodes) },
        { "features", text(job_desc.features) },
        { "tres_per_job", text(job_desc.tres_per_job) },
        { "tres_per_socket", text(job_desc.tres_per_socket) },
        { "cpus_per_tres", text(job_desc.cpus_per_tres) },
        { "mem_per_tres", text(job_desc.mem_per_tres) },
        { "ntasks_per_node", number(job_desc.ntasks_per_node) },
        { "ntasks_per_socket", number(job_desc.ntasks_per_socket) },
        { "ntasks_per_core", number(job_desc.ntasks_per_core) },
        { "ntasks_per_board", number(job_desc.ntasks_per_board) },
        { "ntasks_per_tres", number(job_desc.ntasks_per_tres) },
        { "sockets_per_node", number(job_desc.sockets_per_node) },
        { "cores_per_socket", number(job_desc.cores_per_socket) },
        { "threads_per_core", number(job_desc.threads_per_core) },
        { "boards_per_node", number(job_desc.boards_per_node) },
        { "core_spec", number(job_desc.core_spec) },
        { "thread_spec", number(job_desc.thread_spec) },
        { "pn_min_cpus", number(job_desc.pn_min_cpus) },
        { "pn_min_tmp_disk", number(job_desc.pn_min_tmp_disk) },
        { "max_cpus", number(job_desc.max_cpus) },
        { "shared", number(job_desc.shared) },
        { "contiguous", number(job_desc.contiguous) },
        { "req_switch", number(job_desc.req_switch) },
        { "wait4switch", number(job_desc.wait4switch) },
        { "segment_size", number(job_desc.segment_size) },
        { "reservation", text(job_desc.reservation) },
        { "batch_features", text(job_desc.batch_features) },
        { "priority", number(job_desc.priority) },
        { "dependency", text(job_desc.dependency) },
        { "begin_time", number(job_desc.begin_time) },
        { "bitflags", number(job_desc.bitflags) },
        { "arbitrary", submitted_arbitrary(job_desc) },
    }
end

local function check_int(reply, name, low, optional)
    local v = reply[name]
    if v == nil and optional then return nil end
    if type(v) ~= "number" or v ~= math.floor(v) or v < low or v > MAX_INT then
        fail(name .. " must be an integer in [" .. low .. ", " .. MAX_INT .. "], not " .. quote(v))
    end
    return v
end

local function check_text(reply, name, pattern, max_len)
    local v = reply[name]
    if type(v) ~= "string" or v == "" or #v > max_len or v:find(pattern) then
        fail(name .. " must be a non-empty string of allowed characters, not " .. quote(v))
    end
    return v
end

-- An exact pin's req_nodes (-m arbitrary): one node per task, the plan's task count and node count.
local function check_task_nodes(reply, plan)
    local list = check_text(reply, "task_nodes", "[^%w%-_.,]", MAX_LINE)
    local tasks, nodes, seen = 0, 0, {}
    for name in (list .. ","):gmatch("([^,]*),") do
        if name == "" then fail("task_nodes has an empty name") end
        tasks = tasks + 1
        if not seen[name] then seen[name], nodes = true, nodes + 1 end
    end
    if tasks ~= plan.num_tasks or nodes ~= plan.nodes_count then
        fail("task_nodes names " .. tasks .. " tasks on " .. nodes .. " nodes, not " .. plan.num_tasks
             .. " on " .. plan.nodes_count)
    end
    return list
end

-- The plan for a decoded reply: nil for "none", else {action, decision, and the values to write}.
-- Raises (a message) when anything is off: then nothing is written.
local function plan_from(reply)
    if reply.v ~= 1 then fail("protocol version " .. quote(reply.v) .. ", not 1") end
    if reply.ok ~= true then
        if reply.ok == false then
            return nil, "daemon refused the job: " .. quote(reply.error or "(no reason given)")
        end
        fail("'ok' must be true or false")
    end
    local action = reply.action
    if action == "none" then return nil end
    if action ~= "place" and action ~= "cap" and action ~= "observe" then fail("unknown action " .. quote(action)) end
    local plan = { action = action, decision = check_text(reply, "decision", "[^%w%-_.]", 64) }
    if action == "observe" then
        return plan  -- observe mode: only the decision id, so the daemon can link the outcome
    elseif action == "place" then
        plan.nodes = check_text(reply, "nodes", "[^%w%-_.,%[%]]", 4096)
        plan.nodes_count = check_int(reply, "max_nodes", 1)
        if check_int(reply, "min_nodes", 1) ~= plan.nodes_count then fail("min_nodes must equal max_nodes") end
        plan.num_tasks = check_int(reply, "num_tasks", 1)
        plan.layout = check_text(reply, "layout", "[^%w%-_.,;=%[%]]", MAX_LINE)
        -- topology/block on 26.05+: a pin across blocks as segments each inside one block
        plan.segment_size = check_int(reply, "segment_size", 1, true)
        if reply.task_nodes ~= nil then plan.task_nodes = check_task_nodes(reply, plan) end
    else
        plan.max_nodes = check_int(reply, "max_nodes", 1)
        plan.switches = check_int(reply, "switches", 1, true)
        plan.wait4switch = check_int(reply, "wait4switch_s", 0, true)
        if plan.wait4switch and not plan.switches then fail("wait4switch_s without switches") end
    end
    return plan
end

------------------------------------------------------------------------------------------------
-- Ready answers (slurm_advisor/daemon/ready.py): the daemon's file of answers computed ahead.

local READY_FILE = SOCKET .. ".ready"
local TAKEN_SOCKET = SOCKET .. ".taken"
local MAX_READY = 256 * 1024
-- This hook's run (slurmctld's Lua state lives until a restart or a reload of this file) and how
-- many ready answers it used: a file is trusted only if it was written after the daemon saw them.
local INSTANCE = string.format("%.6f", have_core and core.gettime() or os.time())
local takes, last_epoch = 0, nil
local ready_text, ready = nil, nil

-- The file: a header line, one line per answer, and an end line naming the header's generation,
-- each a flat JSON object (docs/protocol.md). The daemon rewrites it in place: a file caught half
-- written has no end line for its header's generation and is not used. Only the header is decoded
-- per version of the file; an answer is found by its key's JSON text and only its line decoded.
local function parse_ready(text)
    local first = text:find("\n", 1, true)
    if first == nil then return nil end
    local header = decode_flat(text:sub(1, first - 1))
    if header.v ~= 1 or type(header.generation) ~= "number" then return nil end
    local stop = text:find('\n{"end":' .. string.format("%d", header.generation) .. '}\n', first - 1, true)
    if stop == nil then return nil end
    header.body = text:sub(first, stop)  -- "\n" .. answer lines .. "\n"
    return header
end

local function load_ready()
    local f = io.open(READY_FILE, "r")
    if f == nil then return nil end
    local text = f:read(MAX_READY + 1)
    f:close()
    if text == ready_text then return ready end
    ready_text, ready = text, nil
    if type(text) ~= "string" or #text > MAX_READY then return nil end
    local ok, t = pcall(parse_ready, text)
    if ok then ready = t end
    return ready
end

-- The answer line for `key` in the file's body, decoded less its key; nil if there is none. The
-- line starts with the key's exact JSON text (the search's anchor), so the key is not decoded
-- again: it is the one asked for, and it is most of the line's escapes.
local function find_answer(t, key)
    local prefix = '\n{"key":' .. encode_string(key) .. ','
    local at = t.body:find(prefix, 1, true)
    if at == nil then return nil end
    local line_end = t.body:find("\n", at + 1, true)
    return decode_flat("{" .. t.body:sub(at + #prefix, line_end - 1))
end

-- Whether the file counts every answer this hook used: written after the daemon read this hook's
-- last note (hook/seen), or by another run of the daemon, or this hook has used none.
local function trusted(t)
    if type(t.expires) ~= "number" or os.time() > t.expires then return false end
    if t.hook == INSTANCE then return t.seen == takes end
    return takes == 0 or t.epoch ~= last_epoch
end

-- The datagram socket the notes go out on: opened once per Lua state (slurmctld keeps it), and
-- again after a failed send. Unconnected: each sendto finds the daemon's socket by its path.
local taken_sock = nil

local function send_note(note)
    if taken_sock == nil then
        taken_sock = unix.dgram()
        if taken_sock == nil then return false end
        taken_sock:settimeout(0)
    end
    local sent = taken_sock:sendto(note, TAKEN_SOCKET)  -- queued in the daemon's socket, or refused at once
    if not sent then
        taken_sock:close()
        taken_sock = nil
    end
    return sent
end

-- The reply ready for `key`, decoded, once the daemon has been told it is used; nil: ask over the socket.
local function ready_answer(key, job_json)
    if SOCKET_MISSING or unix.dgram == nil then return nil end
    local t = load_ready()
    if t == nil or not trusted(t) then return nil end
    local entry = find_answer(t, key)
    if type(entry) ~= "table" or type(entry.id) ~= "string" or type(entry.reply) ~= "string" then return nil end
    -- checked before the daemon is told: a note is a decision recorded and nodes claimed
    local checked, reply = pcall(decode_flat, entry.reply)
    if not checked or not pcall(plan_from, reply) then return nil end
    local note = encode_object({ { "v", 1 }, { "op", "taken" }, { "answer", entry.id }, { "hook", INSTANCE },
                                 { "seq", takes + 1 }, { "job", job_json } }) .. "\n"
    if #note > MAX_LINE or not send_note(note) then return nil end
    takes, last_epoch = takes + 1, t.epoch
    return reply
end

-- What names a request among the daemon's ready answers: its fields less the job's name and user
-- (`parts`: encode_parts(job)).
local function ready_key(job, parts)
    local kept = {}
    for i, field in ipairs(job) do
        if field[1] ~= "name" and field[1] ~= "user_id" then kept[#kept + 1] = parts[i] end
    end
    return "{" .. table.concat(kept, ",") .. "}"
end

-- Ask the daemon about `job` (read_job's list): a plan, or nil and the reason there is none.
-- Never raises. `use_ready` (slurm_job_submit only): use the daemon's ready answers.
local function advise(job, use_ready)
    local ok, plan, why = pcall(function()
        local parts = encode_parts(job)
        local job_json = encoded("{" .. table.concat(parts, ",") .. "}")
        local key = use_ready and ready_key(job, parts) or nil
        local decoded = nil  -- a ready answer comes decoded
        if use_ready then
            local got, answer = pcall(ready_answer, key, job_json)
            if got then decoded = answer end
        end
        if decoded == nil then
            local fields = { { "v", 1 }, { "op", "advise" }, { "job", job_json } }
            if key then fields[4] = { "ready_key", key } end
            local line = encode_object(fields) .. "\n"
            if #line > MAX_LINE then return nil, "request longer than " .. MAX_LINE .. " bytes" end
            local reply, err = exchange(line)
            if reply == nil then return nil, "daemon unreachable: " .. err end
            local decoded_ok, got = pcall(decode_flat, reply)
            if not decoded_ok then return nil, "bad reply ignored: not a flat JSON object: " .. tostring(got) end
            decoded = got
        end
        local planned_ok, planned, refused = pcall(plan_from, decoded)
        if not planned_ok then return nil, "bad reply ignored: " .. tostring(planned) end
        return planned, refused
    end)
    if not ok then return nil, "hook error: " .. tostring(plan) end
    return plan, why
end

local function disabled()
    local f = io.open(KILL_SWITCH, "r")
    if f then f:close() return true end
    return false
end

-- The decision's stamp appended to the job's admin_comment: sites keep their own tooling's text
-- there, so it is kept (admin_comment is seen by admins only and takes no part in scheduling).
local function stamp(job_desc, text)
    local prior = job_desc.admin_comment
    if type(prior) == "string" and prior ~= "" then text = prior .. " " .. text end
    job_desc.admin_comment = text
end

-- Every write, after every check. (Slurm's job_desc takes these types; nothing here can raise.)
local function apply(job_desc, plan)
    local env = job_desc.environment  -- a batch job's; Slurm ignores (and logs) writes for others
    if env ~= nil then
        -- the marker, for `slurm-advisor layout` in a job Slurm placed (a comment is not in the
        -- job's environment): its key=value pairs only, so nothing else of the comment travels
        local marker = type(job_desc.comment) == "string" and job_desc.comment:match("slurm%-advisor:[%w%s_=.+%-]*")
        if marker then env.SLURM_ADVISOR_MARKER = marker:gsub("%s+$", "") end
    end
    if plan.action == "observe" then
        stamp(job_desc, "slurm-advisor:" .. plan.decision .. ":observed")
        return
    end
    if plan.action == "place" then
        job_desc.req_nodes = plan.task_nodes or plan.nodes
        -- slurmd lays the batch step out from it: it must name the pin's tasks, not the user's
        if plan.task_nodes and env ~= nil then env.SLURM_ARBITRARY_NODELIST = plan.task_nodes end
        job_desc.min_nodes = plan.nodes_count
        job_desc.max_nodes = plan.nodes_count
        job_desc.num_tasks = plan.num_tasks
        if plan.segment_size then job_desc.segment_size = plan.segment_size end
    else
        job_desc.max_nodes = plan.max_nodes
        if plan.switches then
            job_desc.req_switch = plan.switches
            if plan.wait4switch then job_desc.wait4switch = plan.wait4switch end  -- seconds
        end
    end
    stamp(job_desc, "slurm-advisor:" .. plan.decision)
    if env ~= nil then
        if plan.layout then env.SLURM_ADVISOR_LAYOUT = plan.layout end
        env.SLURM_ADVISOR_DECISION = plan.decision
    end
end

-- A plan for a job submitted with -m arbitrary must name every task's node (Slurm counts its
-- req_nodes entries per node) and must not cap its node count (fixed by the list); a plan for any
-- other job must not (22.05 refuses repeats). Else nil and why: the job passes unmodified.
local function fits_distribution(plan, arbitrary)
    if arbitrary and (plan.action == "cap" or (plan.action == "place" and not plan.task_nodes)) then
        return nil, "bad reply ignored: a " .. plan.action .. " without task_nodes for a job submitted with -m arbitrary"
    end
    if not arbitrary and plan.task_nodes then
        return nil, "bad reply ignored: task_nodes for a job not submitted with -m arbitrary"
    end
    return plan
end

local function submit(job_desc)
    local comment = job_desc.comment
    if type(comment) ~= "string" or not string.find(comment, MARKER, 1, true) then return end
    if disabled() then return end
    local plan, why = advise(read_job(job_desc), true)
    if plan ~= nil then plan, why = fits_distribution(plan, submitted_arbitrary(job_desc)) end
    if plan == nil then
        if why then
            local log = why:find("^daemon refused") and slurm.log_info or slurm.log_error
            log("%s", "slurm-advisor: " .. why .. "; job passes unmodified")
        end
        return
    end
    apply(job_desc, plan)
    slurm.log_info("%s", "slurm-advisor: " .. plan.decision .. ": " .. plan.action
                         .. (plan.nodes and (" on " .. plan.nodes)
                             or plan.max_nodes and (" to " .. plan.max_nodes .. " nodes") or ""))
end

local advisor = {
    MARKER = MARKER, instance = INSTANCE, read_job = read_job, advise = advise, disabled = disabled,
    encode_object = encode_object, decode_flat = decode_flat, quote = quote,
}

-- The hook for one job: never raises, always slurm.SUCCESS.
function advisor.job_submit(job_desc, part_list, submit_uid)
    local ok, err = pcall(submit, job_desc)
    if not ok then slurm.log_error("%s", "slurm-advisor: hook error: " .. quote(err) .. "; job passes") end
    return slurm.SUCCESS
end

-- Runs the advisor after the script's own slurm_job_submit (a global defined above the line that
-- calls this), on the job as the site's code left it, and only if that code accepted the job.
-- The site's return value is Slurm's answer, whatever the advisor does. The wrapper is kept in
-- the global slurm_advisor_chained: a second chain() (the line pasted twice: each dofile is a new
-- copy of this module) finds it in place and does nothing, so no job is advised twice.
function advisor.chain()
    local site = slurm_job_submit
    if type(site) ~= "function" then
        error("chain(): no slurm_job_submit is defined above the line that calls it", 0)
    end
    if site == rawget(_G, "slurm_advisor_chained") then return end
    local function chained(job_desc, part_list, submit_uid)
        local rc = site(job_desc, part_list, submit_uid)
        if rc == nil or rc == slurm.SUCCESS then advisor.job_submit(job_desc, part_list, submit_uid) end
        return rc
    end
    slurm_advisor_chained = chained
    slurm_job_submit = chained
end

return advisor
