-- Set the lease of a hold to ARGV[3] ms from now. ARGV: mode, owner token, lease ms.
-- Returns 1, or minus FENCE's value (<= 0) when the owner does not hold the lock in this mode
-- (every hold of the name with a fence up to that value is gone; see release.lua).
--[[helpers]]
local mode, tok, lease = ARGV[1], ARGV[2], tonumber(ARGV[3])
purge()
if mode == 'w' and redis.call('HGET', H, 'wo') == tok then
  if redis.call('EXISTS', Z) == 0 then
    redis.call('PEXPIRE', H, ARGV[3])
    return 1
  end
  redis.call('ZADD', Z, now() + lease, 'w')
  refresh_ttl()
  return 1
end
if mode ~= 'w' and redis.call('HEXISTS', H, 'rc:' .. tok) == 1 then
  redis.call('ZADD', Z, now() + lease, 'r:' .. tok)
  refresh_ttl()
  return 1
end
return -(tonumber(redis.call('GET', FENCE)) or 0)
