-- uses: now_ms
-- While a pass holds the key's lock, the counted event is enough: the pass's release finds it
-- and asks for the next pass itself, so no message is sent that could only find the lock busy.
-- The key is marked dirty for when the lease ends, in case its holder dies instead.
-- A pending mark set ('1') is covered by a dirty mark a lease (ARGV[5], ms) and a second later:
-- the sweep then finds its message queued, held by a worker, or lost (see ``sweep_orphans``).
-- A forced enqueue's message is a new one in the queue: its mark is unheld again.
-- Every enqueue also counts one write in KEYS[5], the enqueuing process's own count (kept ARGV[6]
-- seconds after its last use), in the same script: a Redis that lost the enqueue's effects (a
-- partial loss: the last second of an AOF, a replica a little behind) lost the count with them,
-- and the process that was told the count can tell (``rolled_back``). The count is the process's
-- own, so enqueues by others after the loss cannot move it back up past what was lost.
-- An enqueue also counts as a touch ('touched'), unless it is a periodic refresh (ARGV[7] '1'):
-- a quiet refresh may trust the watches only while nothing touched the key since its basis.
-- A refresh's pending mark is 'r': its message waits behind every other (lowest priority). An
-- event that finds such a mark, not yet held by a worker, publishes a message of its own at the
-- highest priority (3) and marks it so ('1'); the refresh's message ends as stale when it runs.
local writes = redis.call('INCR', KEYS[5])
redis.call('EXPIRE', KEYS[5], ARGV[6])
local look = math.min(tonumber(ARGV[1]) * 1000, tonumber(ARGV[5])) + 1000
redis.call('HINCRBY', KEYS[2], 'events', 1)
if ARGV[7] ~= '1' then redis.call('HINCRBY', KEYS[2], 'touched', 1) end
redis.call('EXPIRE', KEYS[2], ARGV[2])
local now = now_ms()
local pttl = redis.call('PTTL', KEYS[3])
if pttl > 0 and redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('ZADD', KEYS[4], now + pttl, ARGV[4])
  return {2, writes}
end
local mark = '1'
if ARGV[7] == '1' then mark = 'r' end
if redis.call('SET', KEYS[1], mark, 'NX', 'EX', ARGV[1]) then
  redis.call('ZADD', KEYS[4], now + look, ARGV[4])
  return {1, writes}
end
if ARGV[3] == '1' then
  redis.call('SET', KEYS[1], mark, 'EX', ARGV[1])
  redis.call('ZADD', KEYS[4], now + look, ARGV[4])
  return {0, writes}
end
if mark == '1' and redis.call('GET', KEYS[1]) == 'r' then
  redis.call('SET', KEYS[1], '1', 'EX', ARGV[1])
  redis.call('ZADD', KEYS[4], now + look, ARGV[4])
  return {3, writes}
end
return {0, writes}
