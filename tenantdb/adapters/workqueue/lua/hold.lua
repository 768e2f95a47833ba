-- uses: now_ms
-- A worker holding a step's message marks the waiting fence held ('~'), sets it to one lease and
-- marks the key dirty for when that runs out; it renews both until the step starts. Once the
-- worker dies, the order is swept within a lease.
local v = redis.call('GET', KEYS[1])
if v ~= ARGV[1] and v ~= ARGV[1] .. '~' then return 0 end
local now = now_ms()
redis.call('SET', KEYS[1], ARGV[1] .. '~', 'PX', ARGV[2])
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[3])
return 1
