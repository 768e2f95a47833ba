-- uses: now_ms
if not redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[1]) then return 0 end
local now = now_ms()
local look = math.min(tonumber(ARGV[1]), tonumber(ARGV[3])) + 1000
redis.call('ZADD', KEYS[2], now + look, ARGV[2])
return 1
