-- A waiter stops waiting (gave up or was cancelled). ARGV: mode, owner token, wake-up channel,
-- waiter id, readers' turn ms. A lock granted to it meanwhile is handed on as its release would
-- have: a turn for the readers waiting, else the next writer; whoever queued behind its
-- announcement is woken when it was the last of its kind.
--[[helpers]]
local mode, tok, channel, waiter = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
waiters = 3 -- waiting_readers() below must look
if mode == 'w' then
  local queued = redis.call('ZREM', W, waiter) == 1
  redis.call('HDEL', WI, waiter)
  if redis.call('HGET', H, 'wg') == waiter then
    -- Granted before it heard: give back the one hold the grant made.
    redis.call('HDEL', H, 'wg')
    if redis.call('HINCRBY', H, 'wc', -1) <= 0 then
      -- As a release of the write would (the owner may also read, through another call).
      local turn = end_write(ARGV[5])
      if turn or redis.call('EXISTS', H) == 1 or not grant_next(channel) then
        publish(channel, 'released')
      end
    end
  elseif queued and redis.call('EXISTS', W) == 0 then
    publish(channel, 'released')
  end
elseif redis.call('ZREM', WR, 'r:' .. waiter) == 1 and waiting_readers() == 0 then
  local turn = redis.call('ZSCORE', WR, 'turn')
  redis.call('DEL', WR)
  if turn then publish(channel, 'released') end
end
return 1
