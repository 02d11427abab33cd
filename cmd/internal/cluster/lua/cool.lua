-- cool: make a cooldown last at least ms from now (never shorten it), and announce it
-- when it grew. The key's own expiry is the cooldown: no clock but the server's.
--
-- KEYS[1]  the cooldown
-- ARGV: ms, channel, replica, name
-- Returns the milliseconds the cooldown now has left.
local ms = tonumber(ARGV[1])
local left = redis.call('PTTL', KEYS[1])
if left >= ms then
  return left
end
redis.call('SET', KEYS[1], '1', 'PX', ms)
redis.call('PUBLISH', ARGV[2], cjson.encode({kind = 'cooled', replica = ARGV[3], name = ARGV[4], for_ms = ms}))
return ms
