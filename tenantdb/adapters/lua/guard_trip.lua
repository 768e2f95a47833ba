-- Open a site's circuit with the failure's message, for base_ms doubling per recent trip up
-- to cap_ms; returns how long it stays open.
local circuit, trips = KEYS[1], KEYS[2]
local message, base_ms, cap_ms = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local count = redis.call('INCR', trips)
redis.call('PEXPIRE', trips, cap_ms * 4)
local open_ms = math.min(base_ms * 2 ^ (count - 1), cap_ms)
redis.call('SET', circuit, message, 'PX', math.floor(open_ms))
return math.floor(open_ms)
