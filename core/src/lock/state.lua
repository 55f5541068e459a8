-- Read-only view for one owner. ARGV: owner token.
-- Returns {write held, live readers, owner's write count, owner's read count, owner's write
-- fence, owner's read fence} (a fence: a string, or nil when the owner does not hold that way).
--[[helpers]]
local tok = ARGV[1]
local function live(member)
  local score = redis.call('ZSCORE', Z, member)
  return score ~= false and tonumber(score) > now()
end
local writer = redis.call('HGET', H, 'wo')
local write_held = writer ~= false and (redis.call('ZSCORE', Z, 'w') == false or live('w'))
local readers = redis.call('ZCOUNT', Z, '(' .. now(), '+inf')
local my_write, my_read, write_fence, read_fence = 0, 0, false, false
if live('w') then readers = readers - 1 end
if write_held and writer == tok then
  local mine = redis.call('HMGET', H, 'wc', 'wf')
  my_write, write_fence = tonumber(mine[1]), mine[2]
end
if live('r:' .. tok) then
  local mine = redis.call('HMGET', H, 'rc:' .. tok, 'rf:' .. tok)
  my_read, read_fence = tonumber(mine[1]), mine[2]
end
return {write_held and 1 or 0, readers, my_write, my_read, write_fence, read_fence}
