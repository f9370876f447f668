"""The live path: the daemon that answers job_submit.lua, its protocol, claims and modes."""
