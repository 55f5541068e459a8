-- The conformance verb `spend_fences` (README.md): every fencing counter under the key prefix
-- ARGV[1] jumps to 2^53 - 2, so the next acquisition in its hash slot draws the last exact
-- token (2^53 - 1) and the one after it must fail. Returns how many counters it set.
local counters = redis.call('KEYS', ARGV[1] .. ':fence:*')
for _, key in ipairs(counters) do
  redis.call('SET', key, '9007199254740990')
end
return #counters
