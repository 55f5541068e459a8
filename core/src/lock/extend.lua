-- Set the lease of a hold to ARGV[3] ms from now. ARGV: mode, owner token, lease ms.
-- Returns 1, or 0 when the owner does not hold the lock in this mode.
local mode, tok, lease = ARGV[1], ARGV[2], tonumber(ARGV[3])
purge()
if mode == 'w' then
  if redis.call('HGET', H, 'wo') ~= tok then return 0 end
elseif redis.call('HEXISTS', H, 'rc:' .. tok) == 0 then
  return 0
end
redis.call('ZADD', Z, now + lease, holder_member(mode, tok))
refresh_ttl()
return 1
