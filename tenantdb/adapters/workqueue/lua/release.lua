-- uses: now_ms
-- A pass that did not finish (ARGV[7] > 0) leaves its key dirty for when its retry is due: should
-- the retry never be published (the broker refused it, the process died first), the orphan sweep
-- brings the pass then. A pass that finished removes the mark.
-- The key's busy streak ('busy' in KEYS[3]) counts its passes in a row that ended with events
-- that arrived during them. Once it reaches ARGV[9] (0: never), the next pass waits ARGV[10] ms
-- before it starts: its pending mark and dirty mark cover the wait. The reply is what was found,
-- the wait (ms) and the streak. A pass that ends with nothing new ends the streak.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {-1, 0, 0} end
redis.call('DEL', KEYS[1], KEYS[5])
local retry = tonumber(ARGV[7])
if retry > 0 then
  redis.call('ZADD', KEYS[2], now_ms() + retry, ARGV[2])
else
  redis.call('ZREM', KEYS[2], ARGV[2])
end
local started = tonumber(ARGV[3])
if ARGV[4] == '1' then
  local covered = tonumber(redis.call('HGET', KEYS[3], 'covered') or '0')
  if started > covered then
    redis.call('HSET', KEYS[3], 'covered', started)
    redis.call('EXPIRE', KEYS[3], ARGV[5])
  end
end
local events = tonumber(redis.call('HGET', KEYS[3], 'events') or '0')
if events <= started then
  redis.call('HDEL', KEYS[3], 'busy')
  return {0, 0, 0}
end
local busy = redis.call('HINCRBY', KEYS[3], 'busy', 1)
local after = tonumber(ARGV[9])
local wait = 0
if after > 0 and busy >= after then wait = tonumber(ARGV[10]) end
-- Ask for the next pass before the lock is free to take, without counting a new event: a pass
-- that takes the lock from here on covers these events, and this message then ends as stale.
if redis.call('SET', KEYS[4], '1', 'NX', 'PX', tonumber(ARGV[6]) * 1000 + wait) then
  local now = now_ms()
  local look = math.min(tonumber(ARGV[6]) * 1000, tonumber(ARGV[8])) + 1000
  redis.call('ZADD', KEYS[2], now + wait + look, ARGV[2])
  return {2, wait, busy}
end
return {1, 0, busy}
