-- Watchdog: renew many holds in one call. KEYS: state hash and expiries zset of each hold, in pairs.
-- ARGV: lease ms, then mode and owner token of each hold. Returns 1 (renewed) or 0 (gone) per hold.
-- Never shortens a lease. The prelude's H/Z/W are unused here.
local lease = tonumber(ARGV[1])
local result = {}
for i = 1, #KEYS / 2 do
  local hash, zset = KEYS[2 * i - 1], KEYS[2 * i]
  local mode, tok = ARGV[2 * i], ARGV[2 * i + 1]
  local member = holder_member(mode, tok)
  local score = redis.call('ZSCORE', zset, member)
  local held = score and tonumber(score) > now
  if held and mode == 'w' then held = redis.call('HGET', hash, 'wo') == tok end
  if held then
    if tonumber(score) < now + lease then
      redis.call('ZADD', zset, now + lease, member)
      local last = redis.call('ZRANGE', zset, -1, -1, 'WITHSCORES')
      redis.call('PEXPIREAT', hash, last[2])
      redis.call('PEXPIREAT', zset, last[2])
    end
    result[i] = 1
  else
    result[i] = 0
  end
end
return result
