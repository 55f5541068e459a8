-- Set the lease of a hold to ARGV[3] ms from now. ARGV: mode, owner token, lease ms, and
-- optionally a fence: then only the hold with that fence, whose lease is only lengthened (an
-- acquire confirming the hold it took, handed out late: see acquire.rs).
-- Returns 1, or minus FENCE's value (<= 0) when the owner does not hold the lock in this mode
-- (every hold of the name with a fence up to that value is gone; see release.lua).
-- A hold a watchdog keeps (its metadata begins {"wd":LEASE, see inspect.rs) is never set below
-- that lease, whichever client extends it: renewed only every LEASE/3, it would end in between.
--[[helpers]]
local mode, tok, lease, fence = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local function at_least_kept(meta_field)
  local kept = string.match(redis.call('HGET', H, meta_field) or '', '^{"wd":(%d+),')
  if kept and tonumber(kept) > lease then lease = tonumber(kept) end
end
purge(tok)
if mode == 'w' then
  local held = redis.call('HMGET', H, 'wo', 'wf')
  if held[1] == tok and (not fence or held[2] == fence) then
    at_least_kept('wm')
    set_write_lease(lease, fence ~= nil)
    return 1
  end
else
  local held = redis.call('HGET', H, 'rf:' .. tok)
  if held and (not fence or held == fence) then
    at_least_kept('rm:' .. tok)
    local member = 'r:' .. tok
    local ends = fence and redis.call('ZSCORE', Z, member)
    if ends and tonumber(ends) >= now() + lease then return 1 end
    redis.call('ZADD', Z, now() + lease, member)
    refresh_ttl()
    return 1
  end
end
return -(tonumber(redis.call('GET', FENCE)) or 0)
