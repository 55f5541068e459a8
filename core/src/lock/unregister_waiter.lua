-- A writer stops waiting (gave up or was cancelled). ARGV: owner token, wake-up channel.
-- Readers queued behind it are woken when it was the last waiting writer.
if redis.call('ZREM', W, ARGV[1]) == 1 and redis.call('EXISTS', W) == 0 then
  redis.call('PUBLISH', ARGV[2], 'released')
end
return 1
