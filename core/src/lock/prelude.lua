-- Shared by every lock script (prepended at build time). Layout: see src/keys.rs.
-- KEYS[1] state hash H, KEYS[2] holder expiries zset Z, KEYS[3] waiting writers zset W
-- (waiter ids 'N:T' scored by arrival µs: the queue order), KEYS[4] waiting readers zset WR
-- (members 'r:T', plus 'turn' while readers have their turn), KEYS[5] hash WI of the waiting
-- writers' 'expiry:lease:metadata', KEYS[6] the slot's fencing counter FENCE.
--
-- Model: H exists exactly while someone holds the lock. A lone writer's lease is H's TTL and
-- Z does not exist. While readers hold, Z scores each reader's lease end (and the writer's,
-- as member 'w', when it reads too after a downgrade), and H and Z expire at Z's top score.
-- A lock that becomes free while writers wait is granted in the same script to the first of
-- them (H's field 'wg' names that waiter until its own attempt claims the grant).
--
-- Calls inside a script cost ~1-7 µs each (a fresh ZADD the most), so the common paths touch
-- only what exists. The helpers (grant.lua, helpers.lua) are spliced in where a script says
-- --[[helpers]], after its fast path: creating them costs a few µs the common case need not
-- pay (release.lua takes grant.lua earlier, at --[[grant]], for its granting fast path).
local H, Z, W, WR, WI, FENCE = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local clock, clock_us
-- Redis' clock in ms, read once per script and only when needed.
local function now()
  if not clock then
    local t = redis.call('TIME')
    clock_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
    clock = math.floor(clock_us / 1000)
  end
  return clock
end
-- The same clock in µs (exact in a double): orders arrivals of waiters within one ms.
local function now_us()
  now()
  return clock_us
end
