-- Move up to ARGV[2] members due by ARGV[1] from the timetable into its claims set, scored with
-- the claim time: a key leaves the timetable only into a place it is recovered from. Returns
-- member, due time, member, due time, ...
local found = redis.call(
  'ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'WITHSCORES', 'LIMIT', 0, ARGV[2])
for i = 1, #found, 2 do
  redis.call('ZREM', KEYS[1], found[i])
  redis.call('ZADD', KEYS[2], ARGV[1], found[i])
end
return found
