-- affinity_bind: record conversations' bindings (session affinity, SPEC §19) as made now,
-- on the server's clock, and keep the table bounded: bindings older than ttl go (at most
-- 100 a call), then the least recently bound beyond max (at most 1000 a call: a lowered
-- max is reached over a few calls). Every key expires ttl after the last call that wrote
-- it, so a cluster that stops binding leaves nothing behind.
--
-- KEYS[1]  the bindings (hash): conversation name -> binding (JSON; "p" its provider)
-- KEYS[2]  when each was last bound (sorted set): conversation name, score = µs on the
--          server's clock, and above every earlier call's, so that binds within one
--          microsecond keep their order
-- ARGV: ttl_ms, max, at, then per binding: name, binding
--
-- Each provider's bindings are indexed too, for counting them (affinity_count.lua): a
-- sorted set per provider, at .. provider (at is the engine's prefix under its hash tag,
-- so they live in the same slot as KEYS), scored as KEYS[2]. A binding that moves to
-- another provider, expires or is trimmed leaves its provider's set.
-- Returns the number of bindings held after.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local ttl, max, at = tonumber(ARGV[1]) * 1000, tonumber(ARGV[2]), ARGV[3]
local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
if #last == 2 and tonumber(last[2]) >= now then
  now = tonumber(last[2]) + 1
end

-- The provider a stored binding names; nil for one no replica wrote.
local function provider(binding)
  local ok, w = pcall(cjson.decode, binding)
  if ok and type(w) == 'table' and type(w.p) == 'string' and w.p ~= '' then
    return w.p
  end
  return nil
end

-- unindex takes conversation name out of its provider's set.
local function unindex(name)
  local old = redis.call('HGET', KEYS[1], name)
  local p = old and provider(old)
  if p then
    redis.call('ZREM', at .. p, name)
  end
end

local touched = {}
for i = 4, #ARGV - 1, 2 do
  unindex(ARGV[i])
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  redis.call('ZADD', KEYS[2], now, ARGV[i])
  local p = provider(ARGV[i + 1])
  if p then
    redis.call('ZADD', at .. p, now, ARGV[i])
    touched[p] = true
  end
end
local old = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now - ttl, 'LIMIT', 0, 100)
if #old > 0 then
  for _, name in ipairs(old) do
    unindex(name)
  end
  redis.call('ZREM', KEYS[2], unpack(old))
  redis.call('HDEL', KEYS[1], unpack(old))
end
local over = redis.call('ZCARD', KEYS[2]) - max
if over > 0 then
  local gone = redis.call('ZPOPMIN', KEYS[2], math.min(over, 1000))
  for j = 1, #gone, 2 do
    unindex(gone[j])
    redis.call('HDEL', KEYS[1], gone[j])
  end
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[1])
for p in pairs(touched) do
  redis.call('PEXPIRE', at .. p, ARGV[1])
end
return redis.call('ZCARD', KEYS[2])
