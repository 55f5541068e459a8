-- Shared by every lock script (prepended at build time). Layout: see src/keys.rs.
-- KEYS[1] state hash, KEYS[2] holder expiries zset, KEYS[3] waiting writers zset,
-- KEYS[4] waiting readers zset (members 'r:T', plus 'turn' while the readers have their turn).
-- Invariant: H exists exactly while Z has members, and both expire at Z's highest score.
-- Calls inside a script cost ~0.3-2 µs each, so the common paths touch only keys that exist.
local H, Z, W, WR = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local holders_empty = false -- set by purge(): no live holder
local waiters = 0           -- set by purge(): how many of W and WR exist

-- Drops holders and announcements whose time ran out: each holder costs O(log n) once, so no
-- call ever scans all readers.
local function purge()
  local first = redis.call('ZRANGE', Z, 0, 0, 'WITHSCORES')
  holders_empty = #first == 0
  if not holders_empty and tonumber(first[2]) <= now then
    for _, member in ipairs(redis.call('ZRANGEBYSCORE', Z, '-inf', now)) do
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
    holders_empty = redis.call('EXISTS', Z) == 0
    if holders_empty then redis.call('DEL', H) end
  end
  waiters = redis.call('EXISTS', W, WR)
  if waiters > 0 then
    redis.call('ZREMRANGEBYSCORE', W, '-inf', now)
    redis.call('ZREMRANGEBYSCORE', WR, '-inf', now)
    waiters = redis.call('EXISTS', W, WR)
  end
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

-- After adding a holder scored `score`: the first holder sets the expiry directly.
local function expire_with(score)
  if holders_empty then
    redis.call('PEXPIREAT', H, score)
    redis.call('PEXPIREAT', Z, score)
  else
    refresh_ttl()
  end
end

-- Announce a waiter in a zset that lives as long as its latest announcement.
local function announce(zset, member, ttl)
  redis.call('ZADD', zset, now + ttl, member)
  local last = redis.call('ZRANGE', zset, -1, -1, 'WITHSCORES')
  redis.call('PEXPIREAT', zset, last[2])
end

-- Readers announced as waiting (the 'turn' marker is not one of them).
local function waiting_readers()
  if waiters == 0 then return 0 end
  local n = redis.call('ZCARD', WR)
  if n > 0 and redis.call('ZSCORE', WR, 'turn') then n = n - 1 end
  return n
end

-- A reader stops waiting; the readers' turn ends with the last of them.
local function reader_done(tok)
  if waiters == 0 then return end
  redis.call('ZREM', WR, 'r:' .. tok)
  if waiting_readers() == 0 then redis.call('DEL', WR) end
end

local function holder_member(mode, tok)
  if mode == 'w' then return 'w' end
  return 'r:' .. tok
end
