-- Release one hold. ARGV: mode, owner token, wake-up channel, readers' turn ms.
-- Returns {1, holds left for this owner} | {0} when the owner does not hold the lock in this mode.
local mode, tok, channel = ARGV[1], ARGV[2], ARGV[3]
local member = holder_member(mode, tok)

-- Fast path: the owner is the only holder, with one hold, and no reader waits for a turn.
local first_two = redis.call('ZRANGE', Z, 0, 1, 'WITHSCORES')
if #first_two == 2 and first_two[1] == member and tonumber(first_two[2]) > now then
  local count_field = (mode == 'w') and 'wc' or ('rc:' .. tok)
  local state = redis.call('HMGET', H, 'wo', count_field)
  if (mode ~= 'w' or state[1] == tok) and state[2] == '1' and redis.call('EXISTS', WR) == 0 then
    redis.call('DEL', H, Z)
    redis.call('PUBLISH', channel, 'released')
    return {1, 0}
  end
end

purge()

local count_field = 'rc:' .. tok
if mode == 'w' then
  if redis.call('HGET', H, 'wo') ~= tok then return {0} end
  count_field = 'wc'
elseif redis.call('HEXISTS', H, count_field) == 0 then
  return {0}
end

local left = redis.call('HINCRBY', H, count_field, -1)
if left > 0 then return {1, left} end

local readers_left = 0
if redis.call('ZCARD', Z) == 1 then
  redis.call('DEL', H, Z) -- the last holder leaves: nothing stays behind
else
  if mode == 'w' then
    redis.call('HDEL', H, 'wo', 'wc', 'wf', 'wm')
  else
    redis.call('HDEL', H, count_field, 'rf:' .. tok, 'rm:' .. tok)
    readers_left = redis.call('HINCRBY', H, 'n', -1)
    if readers_left <= 0 then redis.call('HDEL', H, 'n') end
  end
  redis.call('ZREM', Z, member)
  refresh_ttl()
end
-- Readers that waited through this write get their turn before the next writer.
if mode == 'w' and waiting_readers() > 0 then announce(WR, 'turn', tonumber(ARGV[4])) end
-- Only a change that can let a waiter in is announced: a writer left, or the last reader did.
if readers_left <= 0 then
  redis.call('PUBLISH', channel, 'released')
end
return {1, 0}
