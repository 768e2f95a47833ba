-- uses: now_ms
-- A message that could not be published leaves no pending mark behind (ARGV[3] == '1': it would
-- only block the key until it ran out) and the key dirty for a retry ARGV[1] ms from now.
if ARGV[3] == '1' then redis.call('DEL', KEYS[1]) end
redis.call('ZADD', KEYS[2], now_ms() + tonumber(ARGV[1]), ARGV[2])
return 1
