-- adjust: correct a bucket's earlier charge by delta tokens: a refund (never beyond a full
-- bucket) when negative, more debt when positive. The same GCRA as acquire.lua.
--
-- KEYS[1]  the bucket
-- ARGV: per_minute, delta
local per_minute, delta = tonumber(ARGV[1]), tonumber(ARGV[2])
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or 0)
local function cost(n)
  return math.ceil(n * 60000000 / per_minute)
end
if delta > 0 then
  tat = math.max(tat, now_us) + cost(delta)
else
  tat = math.max(now_us, tat - cost(-delta))
end
if tat <= now_us then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PX', math.ceil((tat - now_us) / 1000) + 1000)
end
return 1
