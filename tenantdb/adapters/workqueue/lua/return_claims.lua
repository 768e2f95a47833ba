-- Put claims back into the timetable (the earliest time wins against a come-back a pass wrote
-- meanwhile): every claim older than ARGV[1] when there are no further ARGV, else the listed
-- members.
local members
if #ARGV > 1 then
  members = {}
  for i = 2, #ARGV do members[#members + 1] = ARGV[i] end
else
  members = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1])
end
local returned = 0
for _, member in ipairs(members) do
  local score = redis.call('ZSCORE', KEYS[2], member)
  if score then
    redis.call('ZADD', KEYS[1], 'LT', score, member)
    redis.call('ZREM', KEYS[2], member)
    returned = returned + 1
  end
end
return returned
