-- enqueue_workflow.lua: store a workflow (a DAG of pending jobs) whole, or nothing of it.
--
-- KEYS[1]  namespace prefix, '{ns}:' (records, ready, signal and state keys are spelled from it)
-- KEYS[2]  the workflow's hash, '{ns}:workflow:<id>'
--
-- ARGV[1]  now ms, or '' for the server's TIME
-- ARGV[2]  signal list cap      ARGV[3]  signal TTL ms
-- ARGV[4]  the parts of jobs.spi.workflow_cancelled_error (JSON: 4 texts around id, type and
--          state), kept in the workflow's hash for the settles that cancel its jobs
-- then 13 per job, parents before children:  id, type, payload (JSON text), max attempts,
--          delay ms, run_at ms or '' (now + delay), timeout ms or '', keep_until ms or '',
--          trace context or '' (none), max stalls, priority, its parents' ids (JSON array,
--          '' for none), those of them on an on_failure="continue" edge (likewise)
--
-- Every job is checked before the first write (refused, nothing written: an existing workflow
-- or record of any state, a repeated id, a parent that is not an earlier job of the call, a
-- key of another type). A job without parents is due at its run_at (its ready zset, a wake-up
-- signal); one with parents is pending but in no ready zset, 'waiting' for them (see the
-- workflow helpers in common.lua, which the settles use to release or cancel it). Returns 1.

local JOB_ARGS = 14

-- per call
local now = now_ms(ARGV[1])
local now_text = int(now)
local ns, wf = KEYS[1], KEYS[2]
local sp, types = ns .. 'state:', ns .. 'types'
local cap, signal_ttl = tonumber(ARGV[2]), tonumber(ARGV[3])
local workflow_id = string.sub(wf, #ns + #'workflow:' + 1)
local count = (#ARGV - 4) / JOB_ARGS
if count < 1 or count % 1 ~= 0 then
  refuse('enqueue_workflow takes ' .. JOB_ARGS .. ' arguments a job, at least one job')
end

-- Checks.
if check_type(wf, 'hash') > 0 then
  refuse('workflow ' .. wf .. ' exists already')
end
local parts = decoded(ARGV[4], 'workflow error parts')
if #parts ~= 4 then
  refuse('the workflow error has 4 parts')
end
local index_of, dependents, continues, known = {}, {}, {}, {}
for job = 0, count - 1 do
  local a = 4 + job * JOB_ARGS
  local id, job_type = ARGV[a + 1], ARGV[a + 2]
  if index_of[id] then
    refuse('job id ' .. id .. ' is repeated in the workflow')
  end
  local record = ns .. 'job:' .. id
  if check_type(record, 'hash') > 0 then
    refuse('job id ' .. id .. ' exists already')
  end
  index_of[id] = job
  local parents = ARGV[a + 12]
  if parents ~= '' then
    for _, parent in ipairs(decoded(parents, 'parents of job ' .. id)) do
      if not index_of[parent] or parent == id then
        refuse('job ' .. id .. ' depends on ' .. tostring(parent)
          .. ', which is not an earlier job of the workflow')
      end
      dependents[parent] = dependents[parent] or {}
    end
    for _, parent in ipairs(decoded(ARGV[a + 13] ~= '' and ARGV[a + 13] or '[]',
        'continue edges of job ' .. id)) do
      continues[id .. '\0' .. parent] = true
    end
  end
  check_type_once(lane_key(ns, 'ready', ARGV[a + 14], job_type), 'zset')
  if named_queue(ARGV[a + 14]) then
    check_type_once(lane_index(ns, 'live', ARGV[a + 14], job_type), 'zset')
  end
  if known[job_type] == nil then
    known[job_type] = read('set', 'SISMEMBER', types, job_type) == 1
    check_signal(ns .. 'signal:' .. job_type)
    check_state_indexes(sp, job_type, 'pending')
  end
end

-- Writes.
local ids = {}
for job = 0, count - 1 do
  local a = 4 + job * JOB_ARGS
  local id, job_type, priority = ARGV[a + 1], ARGV[a + 2], ARGV[a + 11]
  ids[job + 1] = id
  local run_at = now_text
  if ARGV[a + 6] ~= '' then
    run_at = int(tonumber(ARGV[a + 6]))
  elseif ARGV[a + 5] ~= '0' then
    run_at = int(now + tonumber(ARGV[a + 5]))
  end
  local fields = {'type', job_type, 'payload', ARGV[a + 3], 'state', 'pending', 'attempts',
    '0', 'max_attempts', ARGV[a + 4], 'run_at', run_at, 'created_at', now_text, 'max_stalls',
    ARGV[a + 10], 'workflow', workflow_id}
  local optional = {{'priority', priority ~= '0' and priority}, {'timeout_ms', ARGV[a + 7]},
    {'keep_until', ARGV[a + 8]}, {'trace_context', ARGV[a + 9]},
    {'queue', ARGV[a + 14] ~= 'default' and ARGV[a + 14]}}
  for _, field in ipairs(optional) do
    if field[2] and field[2] ~= '' then
      fields[#fields + 1] = field[1]
      fields[#fields + 1] = field[2]
    end
  end
  local parents = ARGV[a + 12]
  if parents ~= '' then
    local list = cjson.decode(parents)
    fields[#fields + 1] = 'depends_on'
    fields[#fields + 1] = parents
    fields[#fields + 1] = 'waiting'
    fields[#fields + 1] = int(#list)
    for _, parent in ipairs(list) do
      local edges = dependents[parent]
      edges[#edges + 1] = {id, continues[id .. '\0' .. parent] and 1 or 0}
    end
  else
    later_zadd(lane_key(ns, 'ready', ARGV[a + 14], job_type),
      ready_score(tonumber(run_at), tonumber(priority)), id)
    later_signal(ns .. 'signal:' .. job_type)
  end
  redis.call('HSET', ns .. 'job:' .. id, unpack(fields))
  later_move(sp, id, job_type, now_text, nil, 'pending')
  if named_queue(ARGV[a + 14]) then
    redis.call('SADD', types .. ':lanes', ARGV[a + 14] .. '/' .. job_type)
    later_zadd(lane_index(ns, 'live', ARGV[a + 14], job_type), now_text, id)
  end
  if not known[job_type] then
    later_sadd(types, job_type)
    known[job_type] = true
  end
end
for parent, edges in pairs(dependents) do
  redis.call('HSET', ns .. 'job:' .. parent, 'dependents', cjson.encode(edges))
end
redis.call('HSET', wf, 'jobs', cjson.encode(ids), 'open', int(count), 'cap', int(cap),
  'ttl', int(signal_ttl), 'error', ARGV[4])
write_later(cap, signal_ttl)
return 1
