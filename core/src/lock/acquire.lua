-- One acquire attempt, in the mode spliced in below (one script per mode, so that no call
-- spends an argument on it: Redis builds KEYS and ARGV anew for every call, ~1k instructions
-- an entry).
-- ARGV: owner token, lease ms, holder metadata, waiter announcement ms (0 = none), waiter id 'N:T'
-- (unique per acquire call; writers queue under it). (Separate: splitting one string in Lua,
-- ~2.7k instructions, costs more than an argument.)
-- Returns 'fence:hold count' when acquired | retry after ms (>= 1) | -1 (a reader asked to write).
-- (A string and plain integers: Redis converts a table reply field by field, ~2 µs a call.)
-- Fairness: announced waiting writers go before newcomers (no barging) and are granted a freed
-- lock in arrival order; while a writer waits, new readers queue behind it; when a writer
-- leaves while readers wait, those readers have a turn (bounded) before the next writer.
-- Every waiter announces itself.
--[[mode]]
local tok, meta = ARGV[1], ARGV[3]

-- Fast path, the common uncontended case: nobody holds it and nobody waits. (The fence is
-- formatted once, as an integer; the lease passes through as the caller's string.) Z counts
-- too: one left behind (its TTL removed or lengthened by hand) holds ended readers that only
-- purge() may take off, or a new hold would sit beside them.
if redis.call('EXISTS', H, Z, W, WR) == 0 then
  local drawn = redis.call('INCR', FENCE)
  if drawn < 1 or drawn >= 2^53 then
    return redis.error_reply('FENCESPENT the fencing counter of this hash slot is outside 1..2^53-1')
  end
  local fence = string.format('%d', drawn)
  if mode == 'w' then
    redis.call('HSET', H, 'wo', tok, 'wc', '1', 'wf', fence, 'wm', meta)
    redis.call('PEXPIRE', H, ARGV[2])
  else
    -- The clock is not made yet (it is spliced in with the helpers): read it here.
    local t = redis.call('TIME')
    local ends = string.format('%d', t[1] * 1000 + math.floor(t[2] / 1000) + ARGV[2])
    redis.call('HSET', H, 'rc:' .. tok, '1', 'rf:' .. tok, fence, 'rm:' .. tok, meta, 'n', '1')
    redis.call('ZADD', Z, ends, 'r:' .. tok)
    redis.call('PEXPIREAT', H, ends)
    redis.call('PEXPIREAT', Z, ends)
  end
  return fence .. ':1'
end

--[[clock]]
local wait_ms, waiter = ARGV[4], ARGV[5]

-- Announce a waiting writer: its place in the queue is kept from its first announcement on,
-- while its expiry, lease and metadata (for a grant) are renewed. The first announcement is
-- marked 'n' (see grant_next: its client may not listen yet). ttl and lease: ms, as the
-- caller's strings; existed: whether W exists.
local function announce_writer(member, ttl, lease, existed)
  -- W and WI live as long as their latest announcement, never shorter: a TTL is compared first
  -- unless the key is new. (Not PEXPIRE's GT option: Redis 7 only.) They are made, emptied and
  -- given a TTL together, so W's TTL is also WI's. (Whether W exists, live or stale, is all
  -- that matters here: no need to look at its head.)
  local first = redis.call('ZADD', W, 'NX', string.format('%d', now_us()), member) == 1
  redis.call('HSET', WI, member,
    string.format('%s%d:%s:%s', first and 'n' or '', now() + ttl, lease, meta))
  if not existed or redis.call('PTTL', W) < tonumber(ttl) then
    redis.call('PEXPIRE', W, ttl)
    redis.call('PEXPIRE', WI, ttl)
  end
end

-- Second fast path, the common contended case: a writer that will wait finds another writer
-- holding the lock alone (no Z, so H's TTL is that writer's lease). It announces itself and
-- learns when the lease ends, as the slow path would, without making the slow path's helpers
-- (~10 % of Redis' work per contended section). Otherwise the slow path keeps the H fields read.
local state
if mode == 'w' and wait_ms ~= '0' then
  state = redis.call('HMGET', H, 'wo', 'n', 'rc:' .. tok, 'wg', 'q')
  if state[1] and state[1] ~= tok then
    local present = redis.call('EXISTS', Z, Z, W) -- Z counts 2, W 1
    if present < 2 then
      announce_writer(waiter, wait_ms, ARGV[2], present == 1)
      -- A writer's release then looks at the waiting sets (see prelude.lua).
      if not state[5] then redis.call('HSET', H, 'q', '1') end
      local ttl = redis.call('PTTL', H)
      if ttl > 0 then return ttl end
      return tonumber(wait_ms)
    end
  end
end

--[[helpers]]
local lease, wait_ttl = tonumber(ARGV[2]), tonumber(wait_ms)
if purge(tok) or not state then
  state = redis.call('HMGET', H, 'wo', 'n', 'rc:' .. tok, 'wg', 'q')
end
local writer, readers, my_read, granted, flagged = state[1], state[2], state[3], state[4], state[5]
-- H exists exactly while someone holds the lock, and then has a writer ('wo') or readers ('n'):
-- a hash with neither is not ours (another library's lock under the same key, say a Redisson
-- RLock's 'uuid:thread' -> count): refuse rather than hold beside it.
if not writer and not readers and redis.call('EXISTS', H) == 1 then
  return redis.error_reply('FOREIGNKEY ' .. H .. ' is a hash this library did not write')
end

-- When to look again: when the first lease ends or, if the lock is free but others are
-- announced ahead of us, when the first announcement runs out.
local function retry_after()
  local first = z_head or redis.call('ZRANGE', Z, 0, 0, 'WITHSCORES')
  if #first > 0 then return math.max(tonumber(first[2]) - now(), 1) end
  local ttl = redis.call('PTTL', H)
  if ttl > 0 then return ttl end
  local _, info = first_writer()
  if info then return math.max(announced_until(info) - now(), 1) end
  first = redis.call('ZRANGE', WR, 0, 0, 'WITHSCORES')
  if #first > 0 then return math.max(tonumber(first[2]) - now(), 1) end
  return 1
end

local function conflict()
  if wait_ttl > 0 then
    if mode == 'w' then
      announce_writer(waiter, wait_ms, ARGV[2], waiters % 2 == 1)
    else
      announce(WR, 'r:' .. waiter, wait_ttl) -- per call: two calls of one owner may wait
    end
    -- A writer's release then looks at the waiting sets (see prelude.lua).
    if writer and not flagged then redis.call('HSET', H, 'q', '1') end
  end
  return retry_after()
end

-- A free lock found while writers wait ahead of this caller (nobody listened when it was
-- freed, or a lease ran out) goes to the first of them that listens, as a release would hand
-- it on: maybe to this caller, which then holds it (told by this reply, listening or not);
-- anyone else waits.
local function hand_over()
  local _, member = grant_next(H .. ':ch', waiter) -- the lock's channel (see keys.rs)
  if member == waiter then
    redis.call('HDEL', H, 'wg')
    return redis.call('HGET', H, 'wf') .. ':1'
  end
  return conflict()
end

if mode == 'w' then
  if writer then
    if writer ~= tok then return conflict() end
    if granted == waiter then
      -- Granted to this waiter by a release; its wake-up was missed or is still on its way.
      -- Its lease ran from that release: it starts anew, as the caller counts it from here.
      local h = redis.call('HMGET', H, 'wf', 'wc')
      checked_fence(h[1], 'wf')
      redis.call('HDEL', H, 'wg')
      set_write_lease(lease, true)
      return h[1] .. ':' .. h[2]
    end
    -- Re-entry; it never shortens a lease that is already longer. A call of this owner that
    -- waited (the token is shared by two processes) leaves the queue here: left in it, a later
    -- release would grant the lock to a call that has ended.
    local fence = checked_fence(redis.call('HGET', H, 'wf'), 'wf')
    if waiters % 2 == 1 then forget_writer(waiter) end
    local count = redis.call('HINCRBY', H, 'wc', 1)
    set_write_lease(lease, true)
    return fence .. ':' .. count
  end
  if my_read then return -1 end
  if readers then return conflict() end
  if waiters > 0 then
    if readers_turn() and waiting_readers() > 0 then return conflict() end
    -- Writers announced as waiting go first, in arrival order: only the first takes a free lock.
    if writers_wait() and first_waiting ~= waiter then return hand_over() end
    forget_writer(waiter)
  end
  -- Taken past the fast path: others may be waiting, so H is flagged (see prelude.lua).
  local drawn = redis.call('INCR', FENCE)
  if drawn < 1 or drawn >= 2^53 then
    return redis.error_reply('FENCESPENT the fencing counter of this hash slot is outside 1..2^53-1')
  end
  local fence = string.format('%d', drawn)
  redis.call('HSET', H, 'wo', tok, 'wc', '1', 'wf', fence, 'wm', meta, 'q', '1')
  redis.call('PEXPIRE', H, ARGV[2])
  return fence .. ':1'
end

-- Read: the writer itself may read (downgrade); holders re-enter; newcomers wait behind writers.
if writer and writer ~= tok then return conflict() end
if my_read then
  local member = 'r:' .. tok
  local fence = checked_fence(redis.call('HGET', H, 'rf:' .. tok), 'rf')
  local count = redis.call('HINCRBY', H, 'rc:' .. tok, 1)
  reader_done(waiter) -- this call may have waited while another of its owner got in
  if tonumber(redis.call('ZSCORE', Z, member)) < now() + lease then
    redis.call('ZADD', Z, now() + lease, member)
    refresh_ttl()
  end
  return fence .. ':' .. count
end
if not writer and writers_wait() and not readers_turn() then
  if not readers then return hand_over() end
  return conflict()
end
local drawn = redis.call('INCR', FENCE)
if drawn < 1 or drawn >= 2^53 then
  return redis.error_reply('FENCESPENT the fencing counter of this hash slot is outside 1..2^53-1')
end
if writer and redis.call('EXISTS', Z) == 0 then
  -- Downgrade: from now on the writer's lease is kept in Z beside the readers', and the
  -- writer's release must look at Z (the flag, see prelude.lua).
  redis.call('ZADD', Z, writer_expiry(), 'w')
  redis.call('HSET', H, 'q', '1')
end
local fence = string.format('%d', drawn)
redis.call('HSET', H, 'rc:' .. tok, '1', 'rf:' .. tok, fence, 'rm:' .. tok, meta)
redis.call('HINCRBY', H, 'n', 1)
redis.call('ZADD', Z, now() + lease, 'r:' .. tok)
reader_done(waiter)
refresh_ttl()
return fence .. ':1'
