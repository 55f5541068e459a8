-- Read-only view for one owner. ARGV: owner token.
-- Returns {write held, live readers, owner's write count, owner's read count, waiting writers}.
--[[helpers]]
local tok = ARGV[1]
local function live(member)
  local score = redis.call('ZSCORE', Z, member)
  return score ~= false and tonumber(score) > now()
end
local writer = redis.call('HGET', H, 'wo')
local write_held = writer ~= false and (redis.call('ZSCORE', Z, 'w') == false or live('w'))
local readers = redis.call('ZCOUNT', Z, '(' .. now(), '+inf')
local my_write, my_read = 0, 0
if live('w') then readers = readers - 1 end
if write_held and writer == tok then my_write = tonumber(redis.call('HGET', H, 'wc')) end
if live('r:' .. tok) then my_read = tonumber(redis.call('HGET', H, 'rc:' .. tok)) end
local waiting = redis.call('ZCARD', W)
return {write_held and 1 or 0, readers, my_write, my_read, waiting}
