-- affinity_bound: a conversation's binding (session affinity, SPEC §19), if it was last
-- bound less than ttl ago on the server's clock. Reading is no use: only a bind refreshes.
--
-- KEYS[1]  the bindings (hash), KEYS[2] when each was last bound (sorted set); as
--          affinity_bind.lua
-- ARGV: name, ttl_ms
-- Returns {binding, age_ms}, or false when there is none live. (A bind's time can run a
-- little ahead of the clock, affinity_bind.lua: an age is never negative.)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local used = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not used then
  return false
end
local age = math.max(now - tonumber(used), 0)
if age >= tonumber(ARGV[2]) * 1000 then
  return false
end
local b = redis.call('HGET', KEYS[1], ARGV[1])
if not b then
  return false
end
return {b, math.floor(age / 1000)}
