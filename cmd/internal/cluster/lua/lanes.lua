-- lanes: record the effective lanes a replica learned for a scope, and announce them.
--
-- KEYS[1]  the scope's learned lanes
-- ARGV: lanes, channel, replica, name
redis.call('SET', KEYS[1], ARGV[1])
redis.call('PUBLISH', ARGV[2], cjson.encode({kind = 'lanes', replica = ARGV[3], name = ARGV[4], lanes = tonumber(ARGV[1])}))
return 1
