-- A waiter stops waiting (gave up or was cancelled). ARGV: mode, owner token, wake-up channel.
-- Whoever queued behind its announcement is woken when it was the last of its kind.
--[[helpers]]
local mode, tok, channel = ARGV[1], ARGV[2], ARGV[3]
waiters = 1 -- waiting_readers() below must look
if mode == 'w' then
  if redis.call('ZREM', W, tok) == 1 and redis.call('EXISTS', W) == 0 then
    redis.call('PUBLISH', channel, 'released')
  end
elseif redis.call('ZREM', WR, 'r:' .. tok) == 1 and waiting_readers() == 0 then
  local turn = redis.call('ZSCORE', WR, 'turn')
  redis.call('DEL', WR)
  if turn then redis.call('PUBLISH', channel, 'released') end
end
return 1
