-- Set the lease of a hold to ARGV[3] ms from now. ARGV: mode, owner token, lease ms.
-- Returns 1, or minus FENCE's value (<= 0) when the owner does not hold the lock in this mode
-- (every hold of the name with a fence up to that value is gone; see release.lua).
-- A hold a watchdog keeps (its metadata begins {"wd":LEASE, see inspect.rs) is never set below
-- that lease, whichever client extends it: renewed only every LEASE/3, it would end in between.
--[[helpers]]
local mode, tok, lease = ARGV[1], ARGV[2], tonumber(ARGV[3])
local function at_least_kept(meta_field)
  local kept = string.match(redis.call('HGET', H, meta_field) or '', '^{"wd":(%d+),')
  if kept and tonumber(kept) > lease then lease = tonumber(kept) end
end
purge(tok)
if mode == 'w' and redis.call('HGET', H, 'wo') == tok then
  at_least_kept('wm')
  if redis.call('EXISTS', Z) == 0 then
    redis.call('PEXPIRE', H, string.format('%d', lease))
    return 1
  end
  redis.call('ZADD', Z, now() + lease, 'w')
  refresh_ttl()
  return 1
end
if mode ~= 'w' and redis.call('HEXISTS', H, 'rc:' .. tok) == 1 then
  at_least_kept('rm:' .. tok)
  redis.call('ZADD', Z, now() + lease, 'r:' .. tok)
  refresh_ttl()
  return 1
end
return -(tonumber(redis.call('GET', FENCE)) or 0)
