-- Claim a schema for a holder (ARGV[1] "<holder>\n<Database CR>", its holder prefix ARGV[2]) for
-- ARGV[3] seconds: the value of another holder's claim when there is one, else false.
local found = redis.call('GET', KEYS[1])
if found and string.sub(found, 1, #ARGV[2]) ~= ARGV[2] then return found end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[3])
return false
