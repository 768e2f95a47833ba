-- uses: now_ms
-- A waiting fence (``token#S.A``: neither held by a worker nor claimed by a running step) whose
-- queue is empty after a lease has lost its message: no queue has it and no worker received it,
-- or that worker would have marked it held. The lease is ended and the key handed back for a new
-- pass; should the message still turn up, its claim finds the lease gone and it ends. While the
-- queue is not empty the message may be waiting in it, so the key is looked at again a lease later.
-- ARGV[3..] are pairs of queue name and depth; members are "QUEUE KEY".
local now = now_ms()
local depth = {}
for i = 4, #ARGV, 2 do depth[ARGV[i]] = tonumber(ARGV[i + 1]) end
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, ARGV[1])
local out = {}
for _, member in ipairs(due) do
  local space = string.find(member, ' ', 1, true)
  local queue = string.sub(member, 1, space - 1)
  local key = string.sub(member, space + 1)
  local v = redis.call('GET', ARGV[2] .. key)
  if not v or not string.find(v, '#%d+%.%d+$') then
    redis.call('ZREM', KEYS[1], member)
  elseif (depth[queue] or 1) == 0 then
    redis.call('DEL', ARGV[2] .. key)
    redis.call('ZREM', KEYS[1], member)
    table.insert(out, key)
  else
    redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), member)
  end
end
return out
