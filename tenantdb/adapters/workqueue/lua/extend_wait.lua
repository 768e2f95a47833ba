-- uses: now_ms
-- Once the next step's message is published, its wait in the queue is covered (the message is in
-- Redis, not lost with a process), unless a worker already holds it. The wait is looked at again
-- after one lease (``sweep_lost_waits``): a message a worker popped from the queue and died with
-- before it could hold it is in no queue and held by no one. A step may wait in another queue than
-- the one before it, so the key's records in the other queues (ARGV[6..]) go.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local now = now_ms()
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[3])
for i = 6, #ARGV do redis.call('ZREM', KEYS[3], ARGV[i]) end
redis.call('ZADD', KEYS[3], now + tonumber(ARGV[5]), ARGV[4])
return 1
