--[[ A fast fake daemon for the timing test: `lua5.1 responder.lua SOCKET REPLY_LINE`.
One connection at a time: read one line, send REPLY_LINE, close. Prints "ready" once listening. ]]
local unix = require("socket.unix")
local path, reply = arg[1], arg[2] .. "\n"
local server = assert(unix.stream())
assert(server:bind(path))
assert(server:listen(128))
io.write("ready\n")
io.flush()
while true do
    local conn = server:accept()
    if conn then
        conn:settimeout(1)
        if conn:receive("*l") then conn:send(reply) end
        conn:close()
    end
end
