-- Enter a failover group: refused while the site's circuit is open (its message and how long
-- it stays open), busy while every slot is held, else a slot held for lease_ms.
local circuit, slots = KEYS[1], KEYS[2]
local token, limit, lease_ms = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local message = redis.call('GET', circuit)
if message then
  return {'open', message, redis.call('PTTL', circuit)}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', slots, '-inf', now)
if redis.call('ZCARD', slots) >= limit then
  return {'busy', '', 0}
end
redis.call('ZADD', slots, now + lease_ms, token)
redis.call('PEXPIRE', slots, lease_ms)
return {'go', '', 0}
