-- lanes: record the effective lanes a replica learned for a scope, and announce them. A
-- value lower than the stored one always replaces it (a cut must reach every replica); a
-- higher one only while the stored value is still the one this replica last saw (was),
-- so a probe never undoes a cut it had not heard of. Returns the value stored after.
--
-- KEYS[1]  the scope's learned lanes
-- ARGV: lanes, was (0: none seen), channel, replica, name
local n, was = tonumber(ARGV[1]), tonumber(ARGV[2])
local cur = tonumber(redis.call('GET', KEYS[1]))
if cur == n then
  return n
end
if cur and n > cur and cur ~= was then
  return cur
end
redis.call('SET', KEYS[1], n)
redis.call('PUBLISH', ARGV[3], cjson.encode({kind = 'lanes', replica = ARGV[4], name = ARGV[5], lanes = n}))
return n
