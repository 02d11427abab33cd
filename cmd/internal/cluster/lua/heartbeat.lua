-- heartbeat: say this replica is alive, renew (or register) every lease it holds, and
-- list the replicas seen alive within lease_ttl.
--
-- KEYS[1]  the replicas' sorted set: member = replica name, score = last heartbeat (ms)
-- KEYS[2]  the replicas' incarnations (hash): which process last used each name
-- KEYS[3..] the scopes this replica holds leases in
-- ARGV: replica, incarnation, ttl_ms, then per scope key: count, members...
-- Returns {added, previous incarnation or "", name1, age1_ms, name2, age2_ms, ...}: added
-- counts entries that were missing (a lease reclaimed while this replica could not renew
-- it, or a call started without Redis being registered) and are counted again now.
local replica, incarnation, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local previous = redis.call('HGET', KEYS[2], replica) or ''
redis.call('HSET', KEYS[2], replica, incarnation)
redis.call('ZADD', KEYS[1], now, replica)
-- Forget replicas gone for an hour, so the set does not grow with every name ever used.
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now - 3600000)
for _, name in ipairs(gone) do
  redis.call('HDEL', KEYS[2], name)
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - 3600000)

local added, a = 0, 4
for i = 3, #KEYS do
  local n = tonumber(ARGV[a])
  a = a + 1
  for _ = 1, n do
    added = added + redis.call('ZADD', KEYS[i], now + ttl, ARGV[a])
    a = a + 1
  end
  redis.call('PEXPIRE', KEYS[i], 2 * ttl)
end

local out = {added, previous}
local alive = redis.call('ZRANGEBYSCORE', KEYS[1], now - ttl, '+inf', 'WITHSCORES')
for i = 1, #alive, 2 do
  out[#out + 1] = alive[i]
  out[#out + 1] = now - tonumber(alive[i + 1])
end
return out
