-- occupancy: the live lease entries of each scope, at the server's clock.
--
-- KEYS[i]  a scope's sorted set
-- Returns {n1, member..., n2, member..., ...}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {}
for _, key in ipairs(KEYS) do
  local live = redis.call('ZRANGEBYSCORE', key, '(' .. now, '+inf')
  out[#out + 1] = #live
  for _, m in ipairs(live) do
    out[#out + 1] = m
  end
end
return out
