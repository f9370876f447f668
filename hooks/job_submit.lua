--[[
slurm-advisor's standalone job_submit.lua (Slurm's job_submit/lua plugin; Lua 5.1), for a site
with no job_submit.lua of its own. Everything is in slurm_advisor.lua beside this file (a site
with its own script adds one line to it instead: see that file, or docs/admin-guide.md).

Install both with hooks/install.sh. If the module cannot be loaded, this script still loads (a
script that fails to load stops slurmctld at start), logs why, and lets every job pass unmodified.
]]

local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
local loaded, advisor = pcall(dofile, here .. "/slurm_advisor.lua")
if not loaded or type(advisor) ~= "table" then
    slurm.log_error("%s", "slurm-advisor: cannot load " .. here .. "/slurm_advisor.lua: "
                          .. tostring(advisor):sub(1, 300) .. "; every job passes unmodified")
    advisor = nil
end

function slurm_job_submit(job_desc, part_list, submit_uid)
    if advisor == nil then return slurm.SUCCESS end
    return advisor.job_submit(job_desc, part_list, submit_uid)
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
    return slurm.SUCCESS
end

return slurm.SUCCESS
