-- purge.lua: delete one or more jobs that are in one of the given states, freeing their keys.
--
-- KEYS[1]  namespace prefix, '{ns}:' (the ready, key, state, finished keys are spelled from it)
-- then 1 per job:  record (hash)
-- ARGV[1]  now ms, or '' for the server's TIME
-- ARGV[2]  states, comma-separated (never 'active': a worker holds those)
-- ARGV[3]  job type, or '' for any      ARGV[4]  older than ms, or '' for any age
-- ARGV[5]  retention ms of a cancelled job    ARGV[6]  expiry margin ms
-- then 1 per job:  id
--
-- A job goes only if it is in ARGV[2], of ARGV[3], and (with a cutoff) finished, or for a
-- pending one created, at least ARGV[4] ms ago by the script clock. Returns per job: 1 deleted, 0 kept.
-- A pending workflow job deleted ends for its dependents: each is cancelled (error: it ended
-- 'deleted'), unless on a continue edge (see the workflow helpers in common.lua).

local now = now_ms(ARGV[1])
local ns = KEYS[1]
local sp = ns .. 'state:'
local wanted = {}
for state in string.gmatch(ARGV[2], '[^,]+') do
  if state ~= 'active' then
    wanted[state] = true
  end
end
local only_type = ARGV[3]
local cutoff = ARGV[4] ~= '' and now - tonumber(ARGV[4]) or nil
local retain, margin = tonumber(ARGV[5]), tonumber(ARGV[6])

local function check(k, a)
  local job = load_job(KEYS[k + 1], {'key', 'created_at', 'finished_at', 'workflow', 'queue'})
  if job == nil or not wanted[job.state] then
    return 0
  end
  if only_type ~= '' and job.type ~= only_type then
    return 0
  end
  if cutoff and (job.finished_at or created_of(job)) > cutoff then
    return 0
  end
  local plan = {key = KEYS[k + 1], id = ARGV[a + 1], job = job}
  if job.state == 'pending' then
    plan.source = lane_key(ns, 'ready', job.queue, job.type)
  else
    plan.source = ns .. job.state
  end
  check_type_once(plan.source, 'zset')
  check_state_indexes(sp, job.type, job.state)
  if named_queue(job.queue) then  -- its lane's index: live, or that of its finished state
    plan.lane = lane_index(ns, job.state == 'pending' and 'live' or job.state, job.queue,
      job.type)
    check_type_once(plan.lane, 'zset')
  end
  if job.key then
    plan.index = ns .. 'key:' .. job.key
    plan.index_held = index_names(plan.index, ARGV[a + 1])
  end
  if job.workflow and job.state == 'pending' then
    plan.workflow = workflow_check(sp, KEYS[k + 1], ARGV[a + 1], job, 'deleted', true, now)
  end
  return nil, plan
end

local function apply(_, _, plan)
  redis.call('DEL', plan.key)
  workflow_forget(plan.id)
  if plan.index_held then
    redis.call('DEL', plan.index)
  end
  later_zrem(plan.source, plan.id)
  later_move(sp, plan.id, plan.job.type, 0, plan.job.state, nil)
  if plan.lane then
    later_zrem(plan.lane, plan.id)
  end
  if plan.workflow then
    workflow_apply(plan.workflow, now, retain, margin)
  end
  return 1
end

local results = for_each_job(1, 1, 6, 1, check, apply)
write_later(0, 0)
return results
