-- One acquire attempt. KEYS[5] fencing counter of the slot.
-- ARGV: mode ('w' | 'r'), owner token, lease ms, holder metadata, waiter announcement ms (0 = none).
-- Fairness both ways: while a writer waits, new readers queue behind it; when a writer leaves
-- while readers wait, those readers have a turn (bounded) before the next writer.
-- Returns {1, fence, hold count} | {0, retry after ms} | {-1} (a reader asked to write).
local mode, tok, lease, meta, wait_ttl = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5])
purge()

local function retry_after()
  local first = redis.call('ZRANGE', Z, 0, 0, 'WITHSCORES')
  if #first == 0 then return 1 end
  return math.max(tonumber(first[2]) - now, 1)
end

local function conflict()
  if wait_ttl > 0 then
    if mode == 'w' then announce(W, tok, wait_ttl) else announce(WR, 'r:' .. tok, wait_ttl) end
  end
  return {0, retry_after()}
end

local readers_turn = redis.call('ZSCORE', WR, 'turn') ~= false

-- Re-entry never shortens a lease that is already longer.
local function reenter(count_field, fence_field)
  local member = holder_member(mode, tok)
  local count = redis.call('HINCRBY', H, count_field, 1)
  if tonumber(redis.call('ZSCORE', Z, member)) < now + lease then
    redis.call('ZADD', Z, now + lease, member)
    refresh_ttl()
  end
  return {1, tonumber(redis.call('HGET', H, fence_field)), count}
end

local writer = redis.call('HGET', H, 'wo')
if mode == 'w' then
  if writer then
    if writer == tok then return reenter('wc', 'wf') end
    return conflict()
  end
  if redis.call('HEXISTS', H, 'rc:' .. tok) == 1 then return {-1} end
  if redis.call('HEXISTS', H, 'n') == 1 then return conflict() end
  if readers_turn and waiting_readers() > 0 then return conflict() end
  local fence = redis.call('INCR', KEYS[5])
  redis.call('HSET', H, 'wo', tok, 'wc', 1, 'wf', fence, 'wm', meta)
  redis.call('ZADD', Z, now + lease, 'w')
  redis.call('ZREM', W, tok)
  refresh_ttl()
  return {1, fence, 1}
end

-- Read: the writer itself may read (downgrade); holders re-enter; newcomers wait behind writers.
if writer and writer ~= tok then return conflict() end
if redis.call('HEXISTS', H, 'rc:' .. tok) == 1 then return reenter('rc:' .. tok, 'rf:' .. tok) end
if not writer and not readers_turn and redis.call('EXISTS', W) == 1 then return conflict() end
local fence = redis.call('INCR', KEYS[5])
redis.call('HSET', H, 'rc:' .. tok, 1, 'rf:' .. tok, fence, 'rm:' .. tok, meta)
redis.call('HINCRBY', H, 'n', 1)
redis.call('ZADD', Z, now + lease, 'r:' .. tok)
reader_done(tok)
refresh_ttl()
return {1, fence, 1}
