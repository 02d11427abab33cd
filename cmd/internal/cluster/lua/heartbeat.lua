-- heartbeat: renew (or register) every lease this replica holds; unless adopting, also
-- say it is alive and list the replicas seen alive within lease_ttl.
--
-- KEYS[1]  the replicas' sorted set: member = replica name, score = last heartbeat (ms)
-- KEYS[2]  the replicas' incarnations (hash): which process last used each name
-- KEYS[3]  the scopes' names (acquire.lua adds them)
-- KEYS[4..] the scopes this replica holds leases in
-- ARGV: replica, incarnation, ttl_ms, mode, lease key prefix, not_after (ms on the
--       server's clock, 0: none), then per scope key: count, members...
-- mode: 0 adopts only; 1 says this replica is alive; 2 says so only if Redis still has
-- this replica's heartbeat (its sender said it is alive before): without it, Redis lost
-- its data, and the heartbeat registers the calls only, as an adoption does. So the
-- acquire script, which refuses a replica without a heartbeat, goes on refusing this one
-- until its sender knows and has taken the outage rule (its next heartbeat, mode 1): a
-- call it starts meanwhile takes no slot that the peers' calls, not registered again yet,
-- may be using.
-- A heartbeat that reaches Redis after not_after does nothing and fails: its sender gave it
-- up, and may be serving on the outage rule, which its peers must see from its silence.
-- Returns {added, previous incarnation or "", known, now_ms, n, name1, age1_ms, ...,
-- nameN, ageN_ms, view...}: known is 1 when this replica already had a heartbeat in Redis
-- (0: Redis lost its data, or this is its first), added counts entries that were missing
-- (a lease reclaimed while this replica could not renew it, or a call started without
-- Redis being registered) and are counted again now. One that does not say this replica
-- is alive (an adoption, or mode 2 without a heartbeat) returns {added, "", known}: a
-- replica back from an outage registers its calls first, and says it is alive (which
-- tells its peers Redis counts all it runs) only after.
-- A heartbeat then adds the view of the cluster's occupancy: the number of scopes, then
-- per scope its name, the number of its live entries, and those entries (lease ids).
-- The scopes' keys are named from the prefix, not passed: which scopes exist is what the
-- heartbeat learns here (all keys share one hash tag, so one slot of a Redis Cluster).
local replica, incarnation, ttl, mode = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local prefix, not_after = ARGV[5], tonumber(ARGV[6])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if not_after > 0 and now > not_after then
  return redis.error_reply('LATE heartbeat past its sender\'s deadline')
end

local previous, known = '', 0
if redis.call('ZSCORE', KEYS[1], replica) then
  known = 1
end
local beat = mode == '1' or mode == '2' and known == 1
if beat then
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

local added, a = 0, 7
for i = 4, #KEYS do
  local n = tonumber(ARGV[a])
  a = a + 1
  for _ = 1, n do
    added = added + redis.call('ZADD', KEYS[i], now + ttl, ARGV[a])
    a = a + 1
  end
  redis.call('PEXPIRE', KEYS[i], 2 * ttl)
  redis.call('SADD', KEYS[3], string.sub(KEYS[i], #prefix + 1))
  redis.call('PEXPIRE', KEYS[3], 2 * ttl)
end

local out = {added, previous, known}
if not beat then
  return out
end
out[#out + 1] = now
local alive = redis.call('ZRANGEBYSCORE', KEYS[1], now - ttl, '+inf', 'WITHSCORES')
out[#out + 1] = #alive / 2
for i = 1, #alive, 2 do
  out[#out + 1] = alive[i]
  out[#out + 1] = now - tonumber(alive[i + 1])
end

local names = redis.call('SMEMBERS', KEYS[3])
local view = {}
for _, name in ipairs(names) do
  local live = redis.call('ZRANGEBYSCORE', prefix .. name, '(' .. now, '+inf')
  if #live == 0 and redis.call('EXISTS', prefix .. name) == 0 then
    redis.call('SREM', KEYS[3], name)
  elseif #live > 0 then
    view[#view + 1] = {name, live}
  end
end
if #view > 0 then
  redis.call('PEXPIRE', KEYS[3], 2 * ttl)
end
out[#out + 1] = #view
for _, v in ipairs(view) do
  out[#out + 1] = v[1]
  out[#out + 1] = #v[2]
  for _, m in ipairs(v[2]) do
    out[#out + 1] = m
  end
end
return out
