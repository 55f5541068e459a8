-- Release one hold, in the mode spliced in below (one script per mode). ARGV: wake-up channel,
-- readers' turn ms (both the same for every call of a lock handle), owner token, and optionally
-- the fencing token of the hold meant: then only that hold (the owner's newer hold of the name,
-- taken after that one ended, stays).
-- Returns the holds left for this owner (> 0) | the fence of the hold this ended, a string, when
-- none are left, followed by ':' and the client id of the waiter it granted the lock to, if it
-- did | -1 - FENCE's value when the owner does not hold the lock in this mode (every
-- hold of the name with a fence up to that value is gone). Fences tell the client which hold a
-- release ended, so its watchdog forgets that one and not a newer hold of the same owner.
-- A lock this frees goes at once to the first waiting writer that still listens (grant.lua);
-- otherwise a release that can let a waiter in is published ('released') while anyone is
-- announced as waiting (a queue head may wait for this message instead of trying).
--[[mode]]
local tok, meant = ARGV[3], ARGV[4]

-- Fast path: a lone writer with one hold and no reader waiting for a turn. The lock goes to
-- the first waiting writer whose announcement is live and whose client listens (grant_next).
-- A writer's H without the flag 'q' was made by acquire.lua's fast path and nobody has queued
-- or read since (see prelude.lua), so it needs no look at the other keys.
local others, ended = false, nil
if mode == 'w' then
  local state = redis.call('HMGET', H, 'wo', 'wc', 'wf', 'q')
  ended = state[3]
  -- One EXISTS tells all three apart: Z counts 1, WR 2, W 4 (so 0 = nobody, 4 = only W).
  others = state[1] == tok and state[2] == '1' and (not meant or state[3] == meant)
    and (state[4] and redis.call('EXISTS', Z, WR, WR, W, W, W, W) or 0)
  if others and not tonumber(ended) then
    -- Garbage written by something else: refused before anything changes.
    return redis.error_reply('BADFIELD wf of ' .. H .. ' is not a fencing token')
  end
  if others == 0 then
    -- Nobody is announced as waiting, so nobody is told: every waiter announces itself in
    -- the attempt that finds the lock held, and one whose announcement ran out (a process
    -- stalled for two re-check periods) looks again within its re-check interval anyway.
    redis.call('DEL', H)
    return ended
  end
end
local channel, turn_ms = ARGV[1], ARGV[2]

--[[grant]]

if others == 4 then
  -- grant_next overwrites every field of a lone writer's H; with nobody to take it, the lock
  -- is free and stalled waiters (announcements run out) may look now.
  local to = grant_next(channel)
  if to then return ended .. ':' .. to end
  redis.call('DEL', H)
  publish(channel, 'released')
  return ended
end

--[[helpers]]
purge(tok)
local count_field, fence = 'rc:' .. tok, nil
if mode == 'w' then
  local state = redis.call('HMGET', H, 'wo', 'wf')
  if state[1] == tok then fence = checked_fence(state[2], 'wf') end
  count_field = 'wc'
else
  fence = checked_fence(redis.call('HGET', H, 'rf:' .. tok), 'rf')
end
if meant and fence ~= meant then
  -- Not the hold meant: that one ended, the owner's current hold, if any, stays. Gone are the
  -- owner's holds up to meant, but not past the last fence drawn (one taken after this script
  -- gets a larger one) nor the current hold's: meant may be larger than both (a server that
  -- lost its data counts fences anew; a fence of the other mode's hold).
  local upto = math.min(tonumber(meant), tonumber(redis.call('GET', FENCE)) or 0)
  if fence then upto = math.min(upto, tonumber(fence) - 1) end
  return -1 - upto
end
if not fence then return -1 - (tonumber(redis.call('GET', FENCE)) or 0) end

local left = redis.call('HINCRBY', H, count_field, -1)
if left > 0 then return left end

local readers_left = 0
local turn = false -- a readers' turn is on: no grant
if mode == 'w' then
  turn = end_write(turn_ms)
else
  redis.call('HDEL', H, count_field, 'rf:' .. tok, 'rm:' .. tok)
  readers_left = redis.call('HINCRBY', H, 'n', -1)
  if readers_left <= 0 then redis.call('HDEL', H, 'n') end
  redis.call('ZREM', Z, 'r:' .. tok)
  refresh_ttl()
end
-- Only a change that can let a waiter in is announced: a writer left, or the last reader did;
-- and only while someone is announced as waiting (see the fast path).
if readers_left <= 0 and waiters > 0 then
  local free = redis.call('EXISTS', H) == 0
  -- The last reader out does not cut short a readers' turn that some of its readers have not
  -- used yet (woken with the others, they are on their way): the grant waits for its end.
  if free and mode ~= 'w' then turn = readers_turn() and waiting_readers() > 0 end
  local to = not turn and free and grant_next(channel)
  if to then return fence .. ':' .. to end
  publish(channel, 'released')
end
return fence
