-- Helpers shared by the lock scripts' slow paths (spliced in at --[[helpers]], after grant.lua).
-- Set by purge(): which waiting sets exist, 1 for W (and with it WI) plus 2 for WR (so 0 means
-- nobody waits; W may hold only stale announcements until writers_wait() looks); and Z's
-- first entry when purge() left Z as it found it (else nil; {} when there is no Z).
local waiters = 0
local z_head
local writers_looked = false

-- Drops readers (and a Z-tracked writer) whose lease ended, at most 100 a call, and stale
-- waiting readers: a script blocks the whole server, and the readers of a crashed process
-- (thousands, ended together) must not all go in one call. Stale writers' announcements
-- are dropped by writers_wait() and grant_next(), when a decision depends on them: an attempt
-- that finds another writer holding the lock needs neither. Returns whether it changed H.
local function purge(tok)
  local purged = false
  -- One weighted EXISTS says which sets exist: W counts 1, WR 2, Z 4.
  local present = redis.call('EXISTS', W, WR, WR, Z, Z, Z, Z)
  waiters = present % 4
  local first = {}
  if present >= 4 then first = redis.call('ZRANGE', Z, 0, 0, 'WITHSCORES') end
  if #first > 0 and tonumber(first[2]) <= now() then
    -- At most 100 holders a call, so no call walks every reader of a crashed process:
    -- the rest stay counted in 'n' (the lock looks held) and go with the next calls, which a
    -- waiter makes within 1 ms (retry_after: Z's head has ended).
    local ended = redis.call('ZRANGEBYSCORE', Z, '-inf', now(), 'LIMIT', 0, 100)
    if #ended == 100 then
      -- Capped: the caller's own hold (tok) and a writer's decide this call, so whether they
      -- ended is not left to a later one (an ended hold must not be released, extended or
      -- re-entered).
      local seen = {}
      for _, member in ipairs(ended) do seen[member] = true end
      local mine = {'w'}
      if tok then mine[2] = 'r:' .. tok end
      for _, member in ipairs(mine) do
        local score = not seen[member] and redis.call('ZSCORE', Z, member)
        if score and tonumber(score) <= now() then ended[#ended + 1] = member end
      end
    end
    local fields, gone = {}, 0
    for _, member in ipairs(ended) do
      if member == 'w' then
        redis.call('HDEL', H, 'wo', 'wc', 'wf', 'wm', 'wg', 'q')
      else
        local reader = string.sub(member, 3) -- (not the caller's `tok`)
        fields[#fields + 1] = 'rc:' .. reader
        fields[#fields + 1] = 'rf:' .. reader
        fields[#fields + 1] = 'rm:' .. reader
        gone = gone + 1
      end
    end
    if gone > 0 then
      redis.call('HDEL', H, unpack(fields))
      if redis.call('HINCRBY', H, 'n', -gone) <= 0 then
        redis.call('HDEL', H, 'n')
      end
    end
    redis.call('ZREM', Z, unpack(ended))
    -- An empty Z means nobody holds the lock, unless H says otherwise: a lone writer (its lease
    -- is H's TTL) or readers Z no longer lists (Z lost by hand) keep H until its TTL.
    if redis.call('EXISTS', Z) == 0 and redis.call('HEXISTS', H, 'wo') == 0
        and redis.call('HEXISTS', H, 'n') == 0 then
      redis.call('DEL', H)
    end
    purged = true
  else
    z_head = first
  end
  if waiters >= 2 and redis.call('ZREMRANGEBYSCORE', WR, '-inf', now()) > 0
      and redis.call('EXISTS', WR) == 0 then
    waiters = waiters - 2
  end
  return purged
end

-- A fence read back from H to answer with, checked before the script writes anything: garbage
-- there (written by something else) refuses the call whole, rather than answer with what the
-- client cannot read after the script changed the hold.
local function checked_fence(value, field)
  if value and not tonumber(value) then
    error({err = 'BADFIELD ' .. field .. ' of ' .. H .. ' is not a fencing token'})
  end
  return value
end

-- Whether writers are announced as waiting: W has a live head. first_writer() drops stale
-- heads (once per script, when first asked): nil when none is live (W is gone).
local first_waiting -- the first live waiting writer's id, once writers_wait() looked
local function writers_wait()
  if waiters % 2 == 1 and not writers_looked then
    writers_looked = true
    first_waiting = first_writer()
    if not first_waiting then waiters = waiters - 1 end
  end
  return waiters % 2 == 1
end

-- With readers: H and Z live exactly as long as the longest lease in Z.
local function refresh_ttl()
  local last = redis.call('ZRANGE', Z, -1, -1, 'WITHSCORES')
  if #last == 0 then
    -- Readers H still counts (Z lost by hand) keep H until its TTL.
    if redis.call('HEXISTS', H, 'n') == 0 then redis.call('DEL', H) end
    return
  end
  redis.call('PEXPIREAT', H, last[2])
  redis.call('PEXPIREAT', Z, last[2])
end

-- When the writer's lease ends (ms), wherever it is kept.
local function writer_expiry()
  local score = redis.call('ZSCORE', Z, 'w')
  if score then return tonumber(score) end
  return now() + math.max(redis.call('PTTL', H), 0)
end

-- Sets the writer's lease to `ms` (a number) from now, or with `only_lengthen` never shortens it,
-- wherever it is kept (H's TTL for a lone writer, Z after a downgrade).
local function set_write_lease(ms, only_lengthen)
  if only_lengthen and writer_expiry() >= now() + ms then return end
  if redis.call('EXISTS', Z) == 0 then
    redis.call('PEXPIRE', H, string.format('%d', ms))
  else
    redis.call('ZADD', Z, now() + ms, 'w')
    refresh_ttl()
  end
end

-- Announce a waiting reader (or the readers' turn) in WR, which lives as long as its latest
-- announcement.
local function announce(zset, member, ttl)
  redis.call('ZADD', zset, now() + ttl, member)
  local last = redis.call('ZRANGE', zset, -1, -1, 'WITHSCORES')
  redis.call('PEXPIREAT', zset, last[2])
end

-- Readers announced as waiting (the 'turn' marker is not one of them).
local function waiting_readers()
  if waiters < 2 then return 0 end
  local n = redis.call('ZCARD', WR)
  if n > 0 and redis.call('ZSCORE', WR, 'turn') then n = n - 1 end
  return n
end

-- Whether readers have their turn (WR holds the 'turn' marker).
local function readers_turn()
  return waiters >= 2 and redis.call('ZSCORE', WR, 'turn') ~= false
end

-- A reader's call (waiter id) stops waiting; the readers' turn ends with the last of them.
local function reader_done(waiter)
  if waiters < 2 then return end
  redis.call('ZREM', WR, 'r:' .. waiter)
  if waiting_readers() == 0 then redis.call('DEL', WR) end
end

-- A writer's last hold ends (its release, or a grant given back): a lone writer's H goes; with
-- readers (Z) only its fields and its lease. Readers that waited through the write get their
-- turn (turn_ms, the caller's string) before the next writer: returns whether they have it.
local function end_write(turn_ms)
  if redis.call('EXISTS', Z) == 0 then
    redis.call('DEL', H) -- a lone writer: no readers without Z
  else
    redis.call('HDEL', H, 'wo', 'wc', 'wf', 'wm', 'wg', 'q')
    redis.call('ZREM', Z, 'w')
    refresh_ttl()
  end
  if waiting_readers() == 0 then return false end
  announce(WR, 'turn', tonumber(turn_ms))
  return true
end
