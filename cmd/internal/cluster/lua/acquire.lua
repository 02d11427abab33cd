-- acquire: take a lease on every scope and tokens from every bucket of one call, all or
-- none, at the Redis server's clock (TIME), so replicas' own clocks never matter.
--
-- KEYS[1..ns]        the scopes' sorted sets: member = lease id, score = expiry (ms)
-- KEYS[ns+1..ns+nb]  the buckets: the GCRA's theoretical arrival time (µs), absent = full
-- KEYS[ns+nb+1]      the replicas' sorted set (heartbeat.lua)
-- ARGV: member, ttl_ms, ns, nb, channel, replica,
--       then per scope: limit, name; then per bucket: per_minute, capacity, cost
-- Returns {1} when everything was taken, {0, 1, i, 0} when scope i is full,
-- {0, 2, j, wait_ms} when bucket j has not the tokens yet, {0, 3, 0, 0} when this replica
-- has no heartbeat in Redis (Redis lost its data, or never had it): its running calls may
-- not be counted, so nothing is taken until a heartbeat registers them. A member the scope already
-- holds (a retried call) counts as taken. Expired leases are reclaimed on the way, and
-- their scopes announced as freed.
local member, ttl = ARGV[1], tonumber(ARGV[2])
local ns, nb = tonumber(ARGV[3]), tonumber(ARGV[4])
local channel, replica = ARGV[5], ARGV[6]
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now = math.floor(now_us / 1000)

if not redis.call('ZSCORE', KEYS[ns + nb + 1], replica) then
  return {0, 3, 0, 0}
end

local freed = {}
local function announce()
  if #freed > 0 then
    redis.call('PUBLISH', channel, cjson.encode({kind = 'freed', replica = replica, scopes = freed}))
  end
end

local function cost(n, per_minute)
  return math.ceil(n * 60000000 / per_minute)
end

for i = 1, ns do
  local key, limit, name = KEYS[i], tonumber(ARGV[5 + 2 * i]), ARGV[6 + 2 * i]
  if redis.call('ZREMRANGEBYSCORE', key, '-inf', now) > 0 then
    freed[#freed + 1] = name
  end
  if not redis.call('ZSCORE', key, member) and redis.call('ZCARD', key) >= limit then
    announce()
    return {0, 1, i, 0}
  end
end

local base = 6 + 2 * ns
local tats = {}
for j = 1, nb do
  local b = base + 3 * (j - 1)
  local per_minute, capacity, n = tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3])
  local tat = tonumber(redis.call('GET', KEYS[ns + j]) or 0)
  local debt = math.max(0, tat - now_us)
  -- A charge above the capacity waits for a full bucket and leaves it in debt
  -- (actors/policy/tokens explains why).
  local over = debt + cost(math.min(n, capacity), per_minute) - cost(capacity, per_minute)
  if over > 0 then
    announce()
    return {0, 2, j, math.ceil(over / 1000)}
  end
  tats[j] = math.max(tat, now_us) + cost(n, per_minute)
end

for i = 1, ns do
  redis.call('ZADD', KEYS[i], now + ttl, member)
  redis.call('PEXPIRE', KEYS[i], 2 * ttl)
end
for j = 1, nb do
  redis.call('SET', KEYS[ns + j], string.format('%.0f', tats[j]),
    'PX', math.ceil((tats[j] - now_us) / 1000) + 1000)
end
announce()
return {1}
