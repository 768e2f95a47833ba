-- uses: now_ms
-- Compare-and-set of a pass's fence: the lock moves from one value of the pass's token to the
-- next. A claim that finds another value of the same token marks the key dirty for when that
-- lease ends (its holder may have died); any other value means the lease is gone.
local v = redis.call('GET', KEYS[1])
local now = now_ms()
if v == ARGV[2] or (ARGV[7] == '1' and v == ARGV[2] .. '~') then
  redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[4])
  if ARGV[6] == '1' then redis.call('ZADD', KEYS[2], now + tonumber(ARGV[4]), ARGV[5]) end
  return 1
end
if v and (v == ARGV[1] or string.sub(v, 1, string.len(ARGV[1]) + 1) == ARGV[1] .. '#') then
  local pttl = redis.call('PTTL', KEYS[1])
  if pttl < 0 then pttl = 0 end
  redis.call('ZADD', KEYS[2], now + pttl, ARGV[5])
  return 0
end
return -1
