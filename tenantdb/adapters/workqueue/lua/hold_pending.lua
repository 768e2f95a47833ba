-- uses: now_ms
-- A worker holding an entry's message marks the key's pending mark held ('~') for one lease, and
-- marks the key dirty for a second after that: once the worker dies, the mark runs out first, so
-- the sweep's enqueue publishes again.
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local now = now_ms()
redis.call('SET', KEYS[1], '~', 'PX', ARGV[1])
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[1]) + 1000, ARGV[2])
return 1
