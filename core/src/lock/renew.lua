-- Watchdog: renew many holds in one call. KEYS: state hash and expiries zset of each hold, in pairs.
-- ARGV: lease ms, then mode and owner token of each hold. Returns one character per hold, '1'
-- (renewed) or '0' (gone): one bulk string is far cheaper to build and parse than 500 integers.
-- Never shortens a lease. The prelude's H/Z/W/WR are unused here.
local lease = tonumber(ARGV[1])
local result = {}
for i = 1, #KEYS / 2 do
  local hash, zset = KEYS[2 * i - 1], KEYS[2 * i]
  local mode, tok = ARGV[2 * i], ARGV[2 * i + 1]
  local held = false
  local member = (mode == 'w') and 'w' or ('r:' .. tok)
  if mode == 'w' and redis.call('HGET', hash, 'wo') ~= tok then
    held = false
  else
    local score = redis.call('ZSCORE', zset, member)
    if score then
      held = tonumber(score) > now()
      if held and tonumber(score) < now() + lease then
        redis.call('ZADD', zset, now() + lease, member)
        local last = redis.call('ZRANGE', zset, -1, -1, 'WITHSCORES')
        redis.call('PEXPIREAT', hash, last[2])
        redis.call('PEXPIREAT', zset, last[2])
      end
    elseif mode == 'w' then
      -- A lone writer: its lease is the hash's TTL.
      held = true
      if redis.call('PTTL', hash) < lease then redis.call('PEXPIRE', hash, ARGV[1]) end
    end
  end
  result[i] = held and '1' or '0'
end
return table.concat(result)
