-- stats.lua: per job type, due / scheduled / active / completed / failed / cancelled counts and
-- the age of the oldest due job, from the per-type sorted sets (no scan of the jobs).
--
-- KEYS[1]  namespace prefix, '{ns}:' (the types set, ready and state keys are spelled from it)
-- ARGV[1]  now ms, or '' for the server's TIME
--
-- Returns a JSON object: type -> [due, scheduled, active, completed, failed, cancelled,
-- oldest due age ms or -1]; types with no job in any state are left out. Finished counts are
-- the jobs still listed (retention ends are pruned as later jobs finish).

local now = now_ms(ARGV[1])
local ns = KEYS[1]
check_type(ns .. 'types', 'set')
local result = {}
local any = false
for _, job_type in ipairs(redis.call('SMEMBERS', ns .. 'types')) do
  local ready = ns .. 'ready:' .. job_type
  check_type(ready, 'zset')
  local row = {
    redis.call('ZCOUNT', ready, '-inf', now),
    redis.call('ZCOUNT', ready, '(' .. int(now), '+inf'),
  }
  for _, state in ipairs({'active', 'completed', 'failed', 'cancelled'}) do
    local index = ns .. 'state:' .. state .. ':' .. job_type
    check_type(index, 'zset')
    row[#row + 1] = redis.call('ZCARD', index)
  end
  local oldest = -1
  if row[1] > 0 then
    local head = redis.call('ZRANGE', ready, 0, 0, 'WITHSCORES')
    oldest = now - tonumber(head[2])
  end
  row[#row + 1] = oldest
  local total = 0
  for i = 1, 6 do
    total = total + row[i]
  end
  if total > 0 then
    result[job_type] = row
    any = true
  end
end
if not any then
  return '{}'
end
return cjson.encode(result)
