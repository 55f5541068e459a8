-- Grants: the hand-over of a freed lock to the first waiting writer, inside the script that
-- frees it. Spliced in at --[[grant]] (release.lua's fast path needs it), else with the helpers.
-- A waiter id is 'CLIENT-SEQ:TOKEN'; its client listens for grants on the lock's channel plus
-- ':CLIENT' (the same hash tag as the lock, so a cluster can route it by slot).

-- A writer stops waiting (acquired, gave up, or was granted the lock).
local function forget_writer(member)
  redis.call('ZREM', W, member)
  redis.call('HDEL', WI, member)
end

-- When a writer's announcement 'expiry:lease:metadata' (WI's value) runs out, in ms.
local function announced_until(info)
  return tonumber(string.match(info, '^(%d+):'))
end

-- The first waiting writer whose announcement is live, and its 'expiry:lease:metadata'. Stale
-- announcements met at the head are dropped, so a live W always has a live head.
local function first_writer()
  while true do
    local head = redis.call('ZRANGE', W, 0, 0)
    if #head == 0 then return nil end
    local info = redis.call('HGET', WI, head[1])
    if info and announced_until(info) > now() then return head[1], info end
    forget_writer(head[1])
  end
end

-- Hands the free lock (H absent, or a lone writer's H being released) to the first waiting
-- writer whose client still listens, and publishes the grant, so that waiter is in without
-- another round trip. A waiter whose client hears nothing (its process crashed, or its pub/sub
-- connection is down) is dropped from the queue instead of holding the lock for a whole
-- lease; a live one re-announces at its next attempt. (Redis also counts pattern subscribers,
-- so a tool subscribed to '*' makes every waiter look alive, as before this check.) Returns
-- the new holder's client id, or false when no such writer waits (H is then as it was).
local function grant_next(channel)
  while true do
    -- The head leaves the queue whatever happens next (ZPOPMIN: one call for ZRANGE + ZREM).
    local head = redis.call('ZPOPMIN', W)
    if #head == 0 then return false end
    local member = head[1]
    local info = redis.call('HGET', WI, member)
    redis.call('HDEL', WI, member)
    if info and announced_until(info) > now() then
      local drawn = redis.call('INCR', FENCE)
      -- Fences are spent (see prelude.lua): no grant; the waiters' own attempts report it.
      if drawn >= 2^53 then return false end
      local fence = string.format('%d', drawn)
      local client = string.match(member, '^[^:-]*')
      -- Subscribers see the message only after this script, when H below is written.
      local heard = redis.call('PUBLISH', channel .. ':' .. client, 'g:' .. fence .. ':' .. member)
      if heard > 0 then
        local _, lease, meta = string.match(info, '^(%d+):(%d+):(.*)$')
        local tok = string.match(member, '^[^:]*:(.*)$')
        redis.call('HSET', H, 'wo', tok, 'wc', '1', 'wf', fence, 'wm', meta, 'wg', member,
          'q', '1')
        redis.call('PEXPIRE', H, lease)
        return client
      end
    end
  end
end
