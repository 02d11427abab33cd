-- acquire: take a lease on every scope and tokens from every bucket of one call, or of
-- every member of a batch at once, all or none, at the Redis server's clock (TIME), so
-- replicas' own clocks never matter.
--
-- KEYS[1..ns]        the scopes' sorted sets: member = lease id, score = expiry (ms)
-- KEYS[ns+1..ns+nb]  the buckets: the GCRA's theoretical arrival time (µs), absent = full
-- KEYS[ns+nb+1]      the replicas' sorted set (heartbeat.lua)
-- ARGV: ttl_ms, k, ns, nb, channel, replica, then the k lease ids,
--       then per scope: limit, name, count, and the indexes (1..k) of the leases in it;
--       then per bucket: per_minute, capacity, cost (of all the leases together)
-- Returns {1} when everything was taken, {0, 1, i, 0} when scope i has not the room,
-- {0, 2, j, wait_ms} when bucket j has not the tokens yet, {0, 3, 0, 0} when this replica
-- has no heartbeat in Redis (Redis lost its data, or never had it): its running calls may
-- not be counted, so nothing is taken until a heartbeat registers them. A lease the scope
-- already holds (a retried call) counts as taken. Expired leases are reclaimed on the way,
-- and their scopes announced as freed.
local ttl, k = tonumber(ARGV[1]), tonumber(ARGV[2])
local ns, nb = tonumber(ARGV[3]), tonumber(ARGV[4])
local channel, replica = ARGV[5], ARGV[6]
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now = math.floor(now_us / 1000)

if not redis.call('ZSCORE', KEYS[ns + nb + 1], replica) then
  return {0, 3, 0, 0}
end

local members = {}
for i = 1, k do
  members[i] = ARGV[6 + i]
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

local a = 7 + k
local scopes = {}
for i = 1, ns do
  local key, limit, name, count = KEYS[i], tonumber(ARGV[a]), ARGV[a + 1], tonumber(ARGV[a + 2])
  local in_scope = {}
  for x = 1, count do
    in_scope[x] = members[tonumber(ARGV[a + 2 + x])]
  end
  a = a + 3 + count
  scopes[i] = in_scope
  if redis.call('ZREMRANGEBYSCORE', key, '-inf', now) > 0 then
    freed[#freed + 1] = name
  end
  local need = 0
  for _, m in ipairs(in_scope) do
    if not redis.call('ZSCORE', key, m) then
      need = need + 1
    end
  end
  if need > 0 and redis.call('ZCARD', key) + need > limit then
    announce()
    return {0, 1, i, 0}
  end
end

local tats = {}
for j = 1, nb do
  local b = a + 3 * (j - 1)
  local per_minute, capacity, n = tonumber(ARGV[b]), tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2])
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
  for _, m in ipairs(scopes[i]) do
    redis.call('ZADD', KEYS[i], now + ttl, m)
  end
  redis.call('PEXPIRE', KEYS[i], 2 * ttl)
end
for j = 1, nb do
  redis.call('SET', KEYS[ns + j], string.format('%.0f', tats[j]),
    'PX', math.ceil((tats[j] - now_us) / 1000) + 1000)
end
announce()
return {1}
