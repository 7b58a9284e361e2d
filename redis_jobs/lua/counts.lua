-- counts.lua: how many jobs are pending, active, completed, failed and cancelled.
--
-- KEYS[1]  state index prefix, '{ns}:state:'      KEYS[2]  completed zset
-- KEYS[3]  failed zset      KEYS[4]  cancelled zset
-- ARGV[1]  now ms, or '' for the server's TIME
--
-- Returns {pending, active, completed, failed, cancelled}: the sizes of the pending and active
-- state indexes (every transition keeps them, so no counter is written per transition), and
-- finished jobs while their retention lasts (score = retention end > now).

local now = now_ms(ARGV[1])
local after = '(' .. int(now)
check_type(KEYS[2], 'zset')
check_type(KEYS[3], 'zset')
check_type(KEYS[4], 'zset')
return {
  check_type(KEYS[1] .. 'pending', 'zset'),
  check_type(KEYS[1] .. 'active', 'zset'),
  redis.call('ZCOUNT', KEYS[2], after, '+inf'),
  redis.call('ZCOUNT', KEYS[3], after, '+inf'),
  redis.call('ZCOUNT', KEYS[4], after, '+inf'),
}
