-- affinity_count: how many conversations are bound to each of some providers (session
-- affinity, SPEC §19), counting those last bound less than ttl ago on the server's clock.
--
-- KEYS     each provider's set of bindings (affinity_bind.lua)
-- ARGV: ttl_ms
-- Returns the counts, in KEYS' order.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local since = now - tonumber(ARGV[1]) * 1000
local out = {}
for i, key in ipairs(KEYS) do
  out[i] = redis.call('ZCOUNT', key, '(' .. since, '+inf')
end
return out
