-- uses: now_ms
-- Shared by begin and acquire: take the lock, or mark the key dirty until the busy lease ends.
-- A lease taken joins the dirty set too, to be looked at when it would run out: a holder that
-- dies without releasing (a hard time limit, a hand-off whose publish failed) leaves an orphan
-- beat finds, and the release of a pass that ends well removes the mark.
local function lock_or_mark(lock, dirty, token, ttl, member)
  local now = now_ms()
  if redis.call('SET', lock, token, 'NX', 'PX', ttl) then
    redis.call('ZADD', dirty, now + tonumber(ttl), member)
    return true
  end
  local pttl = redis.call('PTTL', lock)
  if pttl < 0 then pttl = 0 end
  redis.call('ZADD', dirty, now + pttl, member)
  return false
end
