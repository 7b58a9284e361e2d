-- stats.lua: per job type, due / scheduled / active / completed / failed / cancelled counts and
-- the age of the oldest due job, from the per-type sorted sets (no scan of the jobs).
--
-- KEYS[1]  namespace prefix, '{ns}:' (the types set, the lanes set, ready and state keys are
--          spelled from it)
-- ARGV[1]  now ms, or '' for the server's TIME
-- ARGV[2]  'queues' for the numbers per named queue instead (see below), else ''
--
-- Returns a JSON object: type -> [due, scheduled, active, completed, failed, cancelled,
-- oldest due age ms or -1]; types with no job in any state are left out. Finished counts are
-- the jobs still listed (retention ends are pruned as later jobs finish). A type's pending jobs
-- are those of its lanes: the default queue's ready zset and those of the named queues its
-- jobs were enqueued in ('{ns}:types:lanes' holds '<queue>/<type>').
-- Per queue: queue -> [due, scheduled, active, completed, failed, cancelled, oldest due age ms
-- or -1]: due, scheduled and active from the lanes' ready and leased zsets; a named queue's
-- finished counts from its lanes' indexes ('{ns}:lane:<state>:<queue>/<type>'), the default
-- queue's from the type's state indexes less its named lanes' (the default queue keeps no
-- lane index of its own). Queues with no job in any state are left out.

local now = now_ms(ARGV[1])
local ns = KEYS[1]
local lanes_key = ns .. 'types:lanes'
check_type(ns .. 'types', 'set')
check_type(lanes_key, 'set')
local result = {}
local any = false

-- Due and scheduled members of a ready zset, and its oldest due run_at (nil: none due).
local function pending(ready)
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
  return due, redis.call('ZCARD', ready) - due, oldest_due
end

local named = {}  -- type -> the named queues of its lanes
for _, lane in ipairs(redis.call('SMEMBERS', lanes_key)) do
  local slash = string.find(lane, '/', 1, true)
  if slash then
    local job_type = string.sub(lane, slash + 1)
    named[job_type] = named[job_type] or {}
    table.insert(named[job_type], string.sub(lane, 1, slash - 1))
  end
end

if ARGV[2] == 'queues' then
  local FINISHED = {'completed', 'failed', 'cancelled'}
  -- A lane's numbers into its queue's row; finished: its completed, failed, cancelled counts.
  local function add(queue, job_type, finished)
    local due, scheduled, oldest_due = pending(lane_key(ns, 'ready', queue, job_type))
    local leased = lane_key(ns, 'leased', queue, job_type)
    check_type(leased, 'zset')
    local active = redis.call('ZCARD', leased)
    if due + scheduled + active + finished[1] + finished[2] + finished[3] > 0 then
      local row = result[queue] or {0, 0, 0, 0, 0, 0, -1}
      row[1], row[2], row[3] = row[1] + due, row[2] + scheduled, row[3] + active
      for i = 1, 3 do
        row[3 + i] = row[3 + i] + finished[i]
      end
      if oldest_due ~= nil and (row[7] < 0 or now - oldest_due > row[7]) then
        row[7] = now - oldest_due
      end
      result[queue] = row
      any = true
    end
  end
  for _, job_type in ipairs(redis.call('SMEMBERS', ns .. 'types')) do
    local in_default = {}  -- the type's finished jobs less those of its named queues' lanes
    for i, state in ipairs(FINISHED) do
      local index = ns .. 'state:' .. state .. ':' .. job_type
      in_default[i] = check_type(index, 'zset')
    end
    for _, queue in ipairs(named[job_type] or {}) do
      local finished = {}
      for i, state in ipairs(FINISHED) do
        finished[i] = check_type(lane_index(ns, state, queue, job_type), 'zset')
        in_default[i] = in_default[i] - finished[i]
      end
      add(queue, job_type, finished)
    end
    for i = 1, 3 do
      in_default[i] = math.max(in_default[i], 0)
    end
    add('default', job_type, in_default)
  end
  if not any then
    return '{}'
  end
  return cjson.encode(result)
end

for _, job_type in ipairs(redis.call('SMEMBERS', ns .. 'types')) do
  local due, scheduled, oldest_due = pending(lane_key(ns, 'ready', nil, job_type))
  for _, queue in ipairs(named[job_type] or {}) do
    local more_due, more_scheduled, more_oldest = pending(lane_key(ns, 'ready', queue, job_type))
    due, scheduled = due + more_due, scheduled + more_scheduled
    if more_oldest ~= nil and (oldest_due == nil or more_oldest < oldest_due) then
      oldest_due = more_oldest
    end
  end
  local row = {due, scheduled}
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
