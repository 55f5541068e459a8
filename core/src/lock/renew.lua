-- Watchdog: renew many holds in one call. KEYS: state hash and expiries zset of each hold, in pairs.
-- ARGV: lease ms, then the tag and the owner token of each hold; a tag is the mode ('w' or 'r')
-- followed by the fence of the hold the watchdog keeps: a later hold of the same owner (taken
-- with a fixed lease, or by another instance after this one ended) is not this one, and is left
-- to its own lease. Returns one character per hold, '1' (renewed), '0' (gone) or 'e' (Redis
-- refused a command on its keys, a key of the wrong type say: each hold is renewed under pcall,
-- so that one bad key fails its own hold, not the renewal of the whole batch): one bulk string
-- is far cheaper to build and parse than 500 integers.
-- Never shortens a lease. The prelude's H/Z/W/WR are unused here.
local lease = tonumber(ARGV[1])
local result = {}
local function renew_one(i)
  local hash, zset = KEYS[2 * i - 1], KEYS[2 * i]
  local tag, tok = ARGV[2 * i], ARGV[2 * i + 1]
  local writer = string.byte(tag) == 119 -- 'w'
  local fence = string.sub(tag, 2)
  local held = false
  local member = writer and 'w' or ('r:' .. tok)
  local mine
  if writer then
    local h = redis.call('HMGET', hash, 'wo', 'wf')
    mine = h[1] == tok and h[2] == fence
  else
    mine = redis.call('HGET', hash, 'rf:' .. tok) == fence
  end
  if mine then
    local score = redis.call('ZSCORE', zset, member)
    if score then
      held = tonumber(score) > now()
      if held and tonumber(score) < now() + lease then
        redis.call('ZADD', zset, now() + lease, member)
        local last = redis.call('ZRANGE', zset, -1, -1, 'WITHSCORES')
        redis.call('PEXPIREAT', hash, last[2])
        redis.call('PEXPIREAT', zset, last[2])
      end
    elseif writer then
      -- A lone writer: its lease is the hash's TTL.
      held = true
      if redis.call('PTTL', hash) < lease then redis.call('PEXPIRE', hash, ARGV[1]) end
    end
  end
  return held and '1' or '0'
end
for i = 1, #KEYS / 2 do
  local ok, answer = pcall(renew_one, i)
  result[i] = ok and answer or 'e'
end
return table.concat(result)
