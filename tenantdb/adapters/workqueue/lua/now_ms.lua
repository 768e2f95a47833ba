-- Every script that reads the clock reads the server's, so that all of them agree with each other
-- and with the TTLs Redis keeps, whichever host the caller runs on.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
