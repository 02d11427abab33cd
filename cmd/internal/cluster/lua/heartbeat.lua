-- heartbeat: renew (or register) every lease this replica holds; unless adopting, also
-- say it is alive and list the replicas seen alive within lease_ttl.
--
-- KEYS[1]  the replicas' sorted set: member = replica name, score = last heartbeat (ms)
-- KEYS[2]  the replicas' incarnations (hash): which process last used each name
-- KEYS[3..] the scopes this replica holds leases in
-- ARGV: replica, incarnation, ttl_ms, beat (1, or 0 to adopt only), then per scope key:
--       count, members...
-- Returns {added, previous incarnation or "", known, name1, age1_ms, ...}: known is 1 when
-- this replica already had a heartbeat in Redis (0: Redis lost its data, or this is its
-- first), added
-- counts entries that were missing (a lease reclaimed while this replica could not renew
-- it, or a call started without Redis being registered) and are counted again now. An
-- adoption returns {added, "", 0}: a replica back from an outage registers its calls first,
-- and says it is alive (which tells its peers Redis counts all it runs) only after.
local replica, incarnation, ttl, beat = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4] == '1'
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local previous, known = '', 0
if beat then
  if redis.call('ZSCORE', KEYS[1], replica) then
    known = 1
  end
  previous = redis.call('HGET', KEYS[2], replica) or ''
  redis.call('HSET', KEYS[2], replica, incarnation)
  redis.call('ZADD', KEYS[1], now, replica)
  -- Forget replicas gone for an hour, so the set does not grow with every name ever used.
  local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now - 3600000)
  for _, name in ipairs(gone) do
    redis.call('HDEL', KEYS[2], name)
  end
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - 3600000)
end

local added, a = 0, 5
for i = 3, #KEYS do
  local n = tonumber(ARGV[a])
  a = a + 1
  for _ = 1, n do
    added = added + redis.call('ZADD', KEYS[i], now + ttl, ARGV[a])
    a = a + 1
  end
  redis.call('PEXPIRE', KEYS[i], 2 * ttl)
end

local out = {added, previous, known}
if not beat then
  return out
end
local alive = redis.call('ZRANGEBYSCORE', KEYS[1], now - ttl, '+inf', 'WITHSCORES')
for i = 1, #alive, 2 do
  out[#out + 1] = alive[i]
  out[#out + 1] = now - tonumber(alive[i + 1])
end
return out
