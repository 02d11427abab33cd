-- spend: add to a client key's spend in one calendar period, in integer micro-USD, and
-- return the period's total across the replicas. A counter that is not there yet (the
-- period's first call anywhere, or Redis lost its data) starts at seed, what the calling
-- replica knows of the period including this call, so that a spend the store knows is
-- never forgotten. The counter expires a day after its period ends.
--
-- KEYS[1]  the counter
-- ARGV: seed, delta, expire_at_ms
local seed, delta, at = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local total
if redis.call('EXISTS', KEYS[1]) == 0 then
  total = seed
  redis.call('SET', KEYS[1], string.format('%.0f', seed))
else
  total = redis.call('INCRBY', KEYS[1], delta)
end
redis.call('PEXPIREAT', KEYS[1], at)
return total
