-- Redis' clock, read once per script and only when needed. Spliced in ahead of the grant
-- functions and helpers (or after the prelude when a script has neither), not into the
-- prelude: making these two closures costs ~1k instructions each, which the fast paths skip.
local clock, clock_us
-- The clock in ms.
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
