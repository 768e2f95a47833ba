-- uses: now_ms
-- A dirty key whose lock is gone (its holder died or lost the lease without releasing) is handed
-- back for an enqueue; one whose lock is still held is looked at again when that lease ends.
-- A pending mark (ARGV[3] .. key) says whether a message is on its way: one a worker holds
-- ('~') is looked at again when the hold would run out; an unheld one ('1', or a refresh's 'r')
-- while the entry queue holds messages at any priority (ARGV[4] > 0) may be behind them, and is
-- looked at again a lease (ARGV[5]) later.
-- An unheld mark with the queue empty, a lease after it was set, lost its message: it goes, and
-- the key is handed back for an enqueue.
local now = now_ms()
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, ARGV[1])
local backlog = tonumber(ARGV[4])
local out = {}
for _, member in ipairs(due) do
  local pttl = redis.call('PTTL', ARGV[2] .. member)
  local mark = false
  if pttl == -2 then mark = redis.call('GET', ARGV[3] .. member) end
  if mark == '~' then
    local held = math.max(redis.call('PTTL', ARGV[3] .. member), 0)
    redis.call('ZADD', KEYS[1], now + held + 1000, member)
  elseif mark and backlog > 0 then
    redis.call('ZADD', KEYS[1], now + tonumber(ARGV[5]), member)
  elseif pttl == -2 then
    if mark then redis.call('DEL', ARGV[3] .. member) end
    redis.call('ZREM', KEYS[1], member)
    table.insert(out, member)
  elseif pttl == -1 then
    redis.call('ZADD', KEYS[1], now + 1000, member)
  else
    redis.call('ZADD', KEYS[1], now + pttl, member)
  end
end
return out
