-- uses: lock_or_mark
redis.call('DEL', KEYS[3])
local events = tonumber(redis.call('HGET', KEYS[4], 'events') or '0')
local covered = tonumber(redis.call('HGET', KEYS[4], 'covered') or '0')
if events <= covered then
  -- Nothing to do: no pass is owed, so no mark stays to bring one.
  if redis.call('EXISTS', KEYS[1]) == 0 then redis.call('ZREM', KEYS[2], ARGV[3]) end
  return {-1, events}
end
-- The events the pass covers when it ends travel in its token, where no message can alter them.
local token = ARGV[1] .. ':' .. events
if lock_or_mark(KEYS[1], KEYS[2], token, ARGV[2], ARGV[3]) then return {1, events} end
return {0, events}
