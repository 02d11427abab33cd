-- release: remove lease entries and announce the scopes they freed.
--
-- KEYS[i]  a scope's sorted set
-- ARGV: channel, replica, then per key: member, scope name
-- Returns how many entries were removed. Removing an entry that is not there (released
-- before, or reclaimed after expiring) does nothing: release is idempotent.
local channel, replica = ARGV[1], ARGV[2]
local freed, seen, removed = {}, {}, 0
for i, key in ipairs(KEYS) do
  local name = ARGV[2 + 2 * i]
  if redis.call('ZREM', key, ARGV[1 + 2 * i]) > 0 then
    removed = removed + 1
    if not seen[name] then
      seen[name] = true
      freed[#freed + 1] = name
    end
  end
end
if #freed > 0 then
  redis.call('PUBLISH', channel, cjson.encode({kind = 'freed', replica = replica, scopes = freed}))
end
return removed
