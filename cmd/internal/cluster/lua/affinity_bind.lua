-- affinity_bind: record conversations' bindings (session affinity, SPEC §19) as made now,
-- on the server's clock, and keep the table bounded: bindings older than ttl go (at most
-- 100 a call), then the least recently bound beyond max (at most 1000 a call: a lowered
-- max is reached over a few calls). Both keys expire ttl after the last call, so a
-- cluster that stops binding leaves nothing behind.
--
-- KEYS[1]  the bindings (hash): conversation name -> binding
-- KEYS[2]  when each was last bound (sorted set): conversation name, score = µs on the
--          server's clock, and above every earlier call's, so that binds within one
--          microsecond keep their order
-- ARGV: ttl_ms, max, then per binding: name, binding
-- Returns the number of bindings held after.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local ttl, max = tonumber(ARGV[1]) * 1000, tonumber(ARGV[2])
local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
if #last == 2 and tonumber(last[2]) >= now then
  now = tonumber(last[2]) + 1
end
for i = 3, #ARGV - 1, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  redis.call('ZADD', KEYS[2], now, ARGV[i])
end
local old = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now - ttl, 'LIMIT', 0, 100)
if #old > 0 then
  redis.call('ZREM', KEYS[2], unpack(old))
  redis.call('HDEL', KEYS[1], unpack(old))
end
local over = redis.call('ZCARD', KEYS[2]) - max
if over > 0 then
  local gone = redis.call('ZPOPMIN', KEYS[2], math.min(over, 1000))
  for j = 1, #gone, 2 do
    redis.call('HDEL', KEYS[1], gone[j])
  end
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[1])
return redis.call('ZCARD', KEYS[2])
