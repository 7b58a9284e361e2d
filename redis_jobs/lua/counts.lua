-- counts.lua: how many jobs are pending, active, completed and failed.
--
-- KEYS[1]  counts hash      KEYS[2]  completed zset      KEYS[3]  failed zset
-- KEYS[4]  cancelled zset
-- ARGV[1]  now ms, or '' for the server's TIME
--
-- Returns {pending, active, completed, failed, cancelled}; finished jobs count while their retention
-- lasts (score = retention end > now).

local now = now_ms(ARGV[1])
check_type(KEYS[1], 'hash')
check_type(KEYS[2], 'zset')
check_type(KEYS[3], 'zset')
check_type(KEYS[4], 'zset')
local live = redis.call('HMGET', KEYS[1], 'pending', 'active')
local after = '(' .. int(now)
return {
  tonumber(live[1] or 0) or 0,
  tonumber(live[2] or 0) or 0,
  redis.call('ZCOUNT', KEYS[2], after, '+inf'),
  redis.call('ZCOUNT', KEYS[3], after, '+inf'),
  redis.call('ZCOUNT', KEYS[4], after, '+inf'),
}
