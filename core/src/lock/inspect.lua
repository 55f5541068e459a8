-- Read-only snapshot for admins and alerts. ARGV: most holders to list; '0' to leave the
-- waiting writers uncounted (an alert needs only the holders).
-- Returns {now ms, last fence, waiting writers, live holders,
--          {{mode, token, count, fence, meta, ms left}...}, waiting readers}.
--[[helpers]]
local limit = tonumber(ARGV[1])
local holders = {}
local live = 0
local w = redis.call('HMGET', H, 'wo', 'wc', 'wf', 'wm')
if w[1] then
  local left = writer_expiry() - now()
  if left > 0 then
    live = 1
    table.insert(holders, {'w', w[1], tonumber(w[2]), tonumber(w[3]), w[4] or '', left})
  end
end
local members = redis.call('ZRANGEBYSCORE', Z, '(' .. now(), '+inf', 'WITHSCORES', 'LIMIT', 0, limit + 1)
for i = 1, #members, 2 do
  local member, left = members[i], tonumber(members[i + 1]) - now()
  if member ~= 'w' and #holders < limit then
    local tok = string.sub(member, 3)
    local f = redis.call('HMGET', H, 'rc:' .. tok, 'rf:' .. tok, 'rm:' .. tok)
    table.insert(holders, {'r', tok, tonumber(f[1]), tonumber(f[2]), f[3] or '', left})
  end
end
-- Nothing is purged here: a member whose lease ended may still be in Z (or WR), and ZCOUNT
-- did not count it, so neither is it taken off again.
local function live_member(zset, member)
  local score = redis.call('ZSCORE', zset, member)
  return score and tonumber(score) > now()
end
local readers = redis.call('ZCOUNT', Z, '(' .. now(), '+inf')
if live_member(Z, 'w') then readers = readers - 1 end
live = live + math.max(readers, 0)
local fence = tonumber(redis.call('GET', FENCE) or '0')
-- Live announcements only (one that ran out may still sit behind a live one): O(waiters),
-- which an admin call may spend; not a contention alert, raised by every waiter that waits
-- long (thousands of them behind a dead holder would each scan all).
local waiting = 0
if ARGV[2] ~= '0' then
  for _, info in ipairs(redis.call('HVALS', WI)) do
    if announced_until(info) > now() then waiting = waiting + 1 end
  end
end
local waiting_r = redis.call('ZCOUNT', WR, '(' .. now(), '+inf')
if live_member(WR, 'turn') then waiting_r = waiting_r - 1 end
return {now(), fence, waiting, live, holders, math.max(waiting_r, 0)}
