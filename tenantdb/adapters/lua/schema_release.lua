-- Give a schema claim back, only when it is the holder's (ARGV[1], its holder prefix).
local found = redis.call('GET', KEYS[1])
if found and string.sub(found, 1, #ARGV[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 0
