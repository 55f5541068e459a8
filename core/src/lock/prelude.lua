-- Shared by every lock script (prepended at build time). Layout: see src/keys.rs.
-- KEYS[1] state hash, KEYS[2] holder expiries zset, KEYS[3] waiting writers zset.
local H, Z, W = KEYS[1], KEYS[2], KEYS[3]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- Drops holders whose lease ended: each costs O(log n) once, so no call ever scans all readers.
local function purge()
  local gone = redis.call('ZRANGEBYSCORE', Z, '-inf', now)
  if #gone > 0 then
    for _, member in ipairs(gone) do
      if member == 'w' then
        redis.call('HDEL', H, 'wo', 'wc', 'wf', 'wm')
      else
        local tok = string.sub(member, 3)
        redis.call('HDEL', H, 'rc:' .. tok, 'rf:' .. tok, 'rm:' .. tok)
        if redis.call('HINCRBY', H, 'n', -1) <= 0 then
          redis.call('HDEL', H, 'n')
        end
      end
    end
    redis.call('ZREMRANGEBYSCORE', Z, '-inf', now)
  end
  redis.call('ZREMRANGEBYSCORE', W, '-inf', now)
end

-- The state lives exactly as long as its longest lease; no holders left means no keys left.
local function refresh_ttl()
  local last = redis.call('ZRANGE', Z, -1, -1, 'WITHSCORES')
  if #last == 0 then
    redis.call('DEL', H, Z)
    return
  end
  redis.call('PEXPIREAT', H, last[2])
  redis.call('PEXPIREAT', Z, last[2])
end

local function holder_member(mode, tok)
  if mode == 'w' then return 'w' end
  return 'r:' .. tok
end
