-- Remove every hold and waiting writer of a name and wake the waiters. ARGV: wake-up channel.
-- Returns 1 when something was held, else 0.
--[[helpers]]
-- The operator's last resort clears keys of any content: purge() (which only makes 'held' say
-- whether a hold is live) must not stop it on a key of another type.
pcall(purge)
local held = redis.call('EXISTS', H)
-- UNLINK: a crowded name's keys are freed off Redis' main thread (DEL blocked it for ms).
redis.call('UNLINK', H, Z, W, WR, WI)
publish(ARGV[1], 'released')
return held
