-- Grants: the hand-over of a freed lock to the first waiting writer, inside the script that
-- frees it. Spliced in at --[[grant]] (release.lua's fast path needs it), else with the helpers.
-- A waiter id is 'CLIENT-SEQ:TOKEN'; its client listens for grants on the lock's channel plus
-- ':CLIENT' (the same hash tag as the lock, so a cluster can route it by slot).

-- PUBLISH, or nil when Redis refuses it: an ACL user without permission for the channel
-- (Redis 7 users have none unless given '&...'). A script that has written must not abort
-- half done; without messages, waiters find the lock free by their own re-checks.
local function publish(channel, message)
  local heard = redis.pcall('PUBLISH', channel, message)
  if type(heard) == 'number' then return heard end
  return nil
end

-- A writer stops waiting (acquired, gave up, or was granted the lock).
local function forget_writer(member)
  redis.call('ZREM', W, member)
  redis.call('HDEL', WI, member)
end

-- When a writer's announcement '[n]expiry:lease:metadata' (WI's value; 'n' until the writer
-- announces itself again) runs out, in ms.
local function announced_until(info)
  return tonumber(string.match(info, '^n?(%d+):'))
end

-- The first waiting writer whose announcement is live, and its WI value. Stale
-- announcements met at the head are dropped, a hundred per four calls, so a live W has a live
-- head; but at most 200 a script (a script blocks the whole server, and a crashed fleet
-- leaves thousands): past that, the next head is returned as it is, stale, and the caller
-- waits (retry_after: 1 ms) for the next script to drop more.
local function first_writer()
  local head = redis.call('ZRANGE', W, 0, 0)
  if #head == 0 then return nil end
  local info = redis.call('HGET', WI, head[1])
  if info and announced_until(info) > now() then return head[1], info end -- the common case
  for _ = 1, 2 do
    local batch = redis.call('ZRANGE', W, 0, 99)
    if #batch == 0 then return nil end
    local infos = redis.call('HMGET', WI, unpack(batch))
    local stale = {}
    local live
    for i = 1, #batch do
      if infos[i] and announced_until(infos[i]) > now() then
        live = i
        break
      end
      stale[#stale + 1] = batch[i]
    end
    if #stale > 0 then
      redis.call('ZREM', W, unpack(stale))
      redis.call('HDEL', WI, unpack(stale))
    end
    if live then return batch[live], infos[live] end
  end
  head = redis.call('ZRANGE', W, 0, 0)
  if #head == 0 then return nil end
  return head[1], redis.call('HGET', WI, head[1])
end

-- Hands the free lock (H absent, or a lone writer's H being released) to the first waiting
-- writer whose client listens, and publishes the grant, so that waiter is in without another
-- round trip. A waiter whose client hears nothing is passed over:
-- - one announced only once ('n' ahead of its WI value) keeps its place for the next grant: it
--   subscribes after that first attempt and may not be listening yet;
-- - one announced again since (so it had subscribed) leaves the queue: its process crashed or
--   its pub/sub connection is down, and it must not hold the lock for a whole lease; a live
--   one re-announces at its next attempt.
-- (Redis also counts pattern subscribers, so a tool subscribed to '*' makes every waiter look
-- alive, as before this check.) The script's own caller (waiter id `caller`, when it is a
-- queued writer) is told by its reply: no message, and its client need not listen yet.
-- Returns the new holder's client id and waiter id, or false when no such writer waits (H is
-- then as it was).
local function grant_next(channel, caller)
  local deaf = {} -- clients found not listening: asked once per script
  -- What becomes of one waiter: 'grant' (it holds the lock now), 'keep', 'drop', 'spent' or
  -- 'mute' (Redis refuses this script's messages).
  local function consider(member, info)
    local client = string.match(member, '^[^:-]*')
    local live = info and announced_until(info) > now()
    local own = member == caller
    if live and (own or not deaf[client]) then
      local drawn = redis.call('INCR', FENCE)
      -- Fences are spent (see prelude.lua): no grant; the waiters' own attempts report it.
      if drawn < 1 or drawn >= 2^53 then return 'spent' end
      local fence = string.format('%d', drawn)
      -- Subscribers see the message only after this script, when H below is written.
      local heard = own or publish(channel .. ':' .. client, 'g:' .. fence .. ':' .. member)
      -- Refused: no grant can be heard, so none is made (the fence drawn stays unused), and
      -- every waiter keeps its place for its own attempt.
      if heard == nil then return 'mute' end
      if heard == true or heard > 0 then
        redis.call('HDEL', WI, member)
        local _, lease, meta = string.match(info, '^n?(%d+):(%d+):(.*)$')
        -- Acquired now, not when the waiter last announced itself: the metadata's time ("at",
        -- its last field) becomes this grant's, by Redis' clock.
        local head = string.match(meta, '^(.*"at":)%d+}$')
        if head then meta = head .. string.format('%d', now()) .. '}' end
        local tok = string.match(member, '^[^:]*:(.*)$')
        redis.call('HSET', H, 'wo', tok, 'wc', '1', 'wf', fence, 'wm', meta, 'wg', member,
          'q', '1')
        redis.call('PEXPIRE', H, lease)
        return 'grant', client
      end
      deaf[client] = true
    end
    if live and string.sub(info, 1, 1) == 'n' then return 'keep' end -- not listening yet
    return 'drop' -- run out, or its client is gone
  end

  -- The common case, a head that listens: ZPOPMIN is one call for ZRANGE + ZREM.
  local head = redis.call('ZPOPMIN', W)
  if #head == 0 then return false end
  local first, client = consider(head[1], redis.call('HGET', WI, head[1]))
  if first == 'grant' then return client, head[1] end
  if first == 'drop' then redis.call('HDEL', WI, head[1]) end
  -- Passed over, the head goes back with its score at the end. The rest is read a hundred at a
  -- time, so a long run of waiters passed over costs two calls a hundred (those that keep their
  -- place are left where they are); at most 200 a script, since a script blocks the whole
  -- server: past that the lock is free and announced so, and the first waiter whose attempt
  -- comes takes it (below).
  local granted, member, verdict = false, nil, first
  local from, considered = 0, 0
  local dropped_all = first == 'drop' and 1 or 0 -- how many were dropped
  while (verdict == 'keep' or verdict == 'drop') and not granted and considered < 200 do
    local batch = redis.call('ZRANGE', W, from, from + 99)
    if #batch == 0 then break end
    considered = considered + #batch
    local infos = redis.call('HMGET', WI, unpack(batch))
    local dropped = {}
    for i = 1, #batch do
      verdict, client = consider(batch[i], infos[i])
      if verdict == 'grant' then
        granted, member = client, batch[i]
        redis.call('ZREM', W, member)
        break
      elseif verdict == 'drop' then
        dropped[#dropped + 1] = batch[i]
      elseif verdict == 'spent' or verdict == 'mute' then
        break
      end
    end
    dropped_all = dropped_all + #dropped
    if #dropped > 0 then
      redis.call('ZREM', W, unpack(dropped))
      redis.call('HDEL', WI, unpack(dropped))
    end
    from = from + #batch - #dropped
  end
  -- Past the cap with none of them dropped (all keep their places: later scripts would walk
  -- the same ones again), a queued caller that listens (it is making this attempt) takes the
  -- free lock; whoever sits between them and the caller is not known without the walk the cap
  -- forbids. (Where some were dropped, the next scripts get further.)
  if not granted and considered >= 200 and dropped_all == 0 and caller
      and verdict == 'keep' then
    local info = redis.call('HGET', WI, caller)
    local outcome, client_of = 'drop', nil
    if info then outcome, client_of = consider(caller, info) end
    if outcome == 'grant' then
      granted, member = client_of, caller
      redis.call('ZREM', W, caller)
    end
  end
  if first ~= 'drop' then
    redis.call('ZADD', W, head[2], head[1])
    -- W was made anew if ZPOPMIN emptied it; WI, still holding the head, has the TTL of both.
    local ttl = redis.call('PTTL', WI)
    if ttl > 0 then redis.call('PEXPIRE', W, ttl) end
  end
  return granted, member
end
