-- acquire: take a lease on every scope and tokens from every bucket of one call, or of
-- every member of a batch at once, all or none, at the Redis server's clock (TIME), so
-- replicas' own clocks never matter.
--
-- KEYS[1..ns]        the scopes' sorted sets: member = lease id, score = expiry (ms)
-- KEYS[ns+1..ns+nb]  the buckets: the GCRA's theoretical arrival time (µs), absent = full
-- KEYS[ns+nb+1]      the replicas' sorted set (heartbeat.lua)
-- KEYS[ns+nb+2]      the scopes' names (a set, read by heartbeat.lua for the view)
-- ARGV: ttl_ms, k, ns, nb, channel, replica, silent_ms, horizon_ms, then the k lease ids,
--       then per scope: limit, name, count, and the indexes (1..k) of the leases in it;
--       then per bucket: per_minute, capacity, cost (of all the leases together)
-- Returns {1} when everything was taken, {0, 1, i, 0} when scope i has not the room,
-- {0, 2, j, wait_ms} when bucket j has not the tokens yet, {0, 3, 0, 0} when this replica
-- has no heartbeat in Redis (Redis lost its data, or never had it): its running calls may
-- not be counted, nor its peers', so nothing is taken until a heartbeat says it is alive
-- (heartbeat.lua writes none for a replica Redis lost until that replica knows, and runs
-- on the outage rule). A lease the scope already holds (a retried call) counts as taken.
-- Expired leases are reclaimed on the way, and their scopes announced as freed.
--
-- A replica whose heartbeat is older than silent_ms (but younger than horizon_ms) may be
-- cut off from Redis and serving on its share by the outage rule: each scope keeps that
-- share free for it, less the live entries it still has there (which ZCARD counts), so
-- the calls it starts unheard are counted here too; and each bucket keeps its share of
-- the rate and the capacity for it (below).
local ttl, k = tonumber(ARGV[1]), tonumber(ARGV[2])
local ns, nb = tonumber(ARGV[3]), tonumber(ARGV[4])
local channel, replica = ARGV[5], ARGV[6]
local silent_ms, horizon_ms = tonumber(ARGV[7]), tonumber(ARGV[8])
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now = math.floor(now_us / 1000)

if not redis.call('ZSCORE', KEYS[ns + nb + 1], replica) then
  return {0, 3, 0, 0}
end

local members = {}
for i = 1, k do
  members[i] = ARGV[8 + i]
end

-- The silent replicas, each with its place among the replicas its shares were taken
-- among (those whose heartbeat was younger than ttl at its last one), in byte order: a
-- share is limit / n, the remainder going one each to the first (shareOf in view.go).
-- Byte order, whatever the server's collation locale (Lua's < on strings follows it).
local function before(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x < y
    end
  end
  return #a < #b
end
local silent = {}
local quiet = redis.call('ZRANGEBYSCORE', KEYS[ns + nb + 1], now - horizon_ms, '(' .. (now - silent_ms), 'WITHSCORES')
for x = 1, #quiet, 2 do
  local beat = tonumber(quiet[x + 1])
  if quiet[x] ~= replica then
    local names = redis.call('ZRANGEBYSCORE', KEYS[ns + nb + 1], '(' .. (beat - ttl), '+inf')
    table.sort(names, before)
    for i, n in ipairs(names) do
      if n == quiet[x] then
        silent[#silent + 1] = {name = quiet[x], alive = #names, place = i - 1}
      end
    end
  end
end
local function reserved(key, limit)
  if #silent == 0 then
    return 0
  end
  local live = {}
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', key, '(' .. now, '+inf')) do
    local r = string.match(m, '^([^|]*)|')
    if r then
      live[r] = (live[r] or 0) + 1
    end
  end
  local n = 0
  for _, s in ipairs(silent) do
    local share = math.floor(limit / s.alive)
    if s.place < limit % s.alive then
      share = share + 1
    end
    n = n + math.max(0, share - (live[s.name] or 0))
  end
  return n
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

local a = 9 + k
local scopes, names = {}, {}
for i = 1, ns do
  local key, limit, name, count = KEYS[i], tonumber(ARGV[a]), ARGV[a + 1], tonumber(ARGV[a + 2])
  local in_scope = {}
  for x = 1, count do
    in_scope[x] = members[tonumber(ARGV[a + 2 + x])]
  end
  a = a + 3 + count
  scopes[i], names[i] = in_scope, name
  if redis.call('ZREMRANGEBYSCORE', key, '-inf', now) > 0 then
    freed[#freed + 1] = name
  end
  local need = 0
  for _, m in ipairs(in_scope) do
    if not redis.call('ZSCORE', key, m) then
      need = need + 1
    end
  end
  if need > 0 and redis.call('ZCARD', key) + reserved(key, limit) + need > limit then
    announce()
    return {0, 1, i, 0}
  end
end

-- A silent replica lends tokens on its share of each bucket (Share in outage.go: the rate
-- and the capacity divided by the replicas alive at its last heartbeat, at least 1 each):
-- the shared bucket runs on what is left, so together they stay within the rate.
local tats = {}
for j = 1, nb do
  local b = a + 3 * (j - 1)
  local per_minute, capacity, n = tonumber(ARGV[b]), tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2])
  for _, s in ipairs(silent) do
    per_minute = per_minute - math.max(1, math.floor(tonumber(ARGV[b]) / s.alive))
    capacity = capacity - math.max(1, math.floor(tonumber(ARGV[b + 1]) / s.alive))
  end
  per_minute, capacity = math.max(1, per_minute), math.max(1, capacity)
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
for i = 1, ns do
  redis.call('SADD', KEYS[ns + nb + 2], names[i])
end
if ns > 0 then
  redis.call('PEXPIRE', KEYS[ns + nb + 2], 2 * ttl)
end
for j = 1, nb do
  redis.call('SET', KEYS[ns + j], string.format('%.0f', tats[j]),
    'PX', math.ceil((tats[j] - now_us) / 1000) + 1000)
end
announce()
return {1}
