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
  -- Per priority present (ready_score): its due members and its oldest due run_at.
  local due, oldest_due = 0, nil
  each_band(ready, function(base, score)
    local count = redis.call('ZCOUNT', ready, int(base), int(base + now))
    if count > 0 then
      due = due + count
      if oldest_due == nil or score - base < oldest_due then
        oldest_due = score - base
      end
    end
  end)
  local row = {due, redis.call('ZCARD', ready) - due}
  for _, state in ipairs({'active', 'completed', 'failed', 'cancelled'}) do
    local index = ns .. 'state:' .. state .. ':' .. job_type
    check_type(index, 'zset')
    row[#row + 1] = redis.call('ZCARD', index)
  end
  local oldest = -1
  if oldest_due ~= nil then
    oldest = now - oldest_due
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
