-- requeue.lua: an operator's retry of one or more failed or cancelled jobs: pending, due now.
--
-- KEYS[1]  namespace prefix, '{ns}:' (the ready, signal, key, state keys are spelled from it)
-- then 1 per job:  record (hash)
-- ARGV[1]  now ms, or '' for the server's TIME    ARGV[2]  signal list cap    ARGV[3]  signal TTL
-- then 1 per job:  id
--
-- Each job gets exactly one more attempt (max_attempts = attempts + 1) and keeps its id, key,
-- payload and errors; it no longer expires. Returns per job: 1 requeued, 0 (nothing written)
-- in any other state or unknown. A workflow job counts as open in its workflow again, whose
-- key loses its expiry; the job waits for no parent (workflow_reopen, in common.lua).

local now = now_ms(ARGV[1])
local ns = KEYS[1]
local sp = ns .. 'state:'
local cap, signal_ttl = tonumber(ARGV[2]), tonumber(ARGV[3])


local function check(k, a)
  local job = load_job(KEYS[k + 1], {'key', 'created_at', 'expires_at', 'priority',
    'workflow', 'queue'})
  if job == nil or (job.state ~= 'failed' and job.state ~= 'cancelled') then
    return 0
  end
  if not is_alive(job, KEYS[k + 1], now) then
    return 0
  end
  local plan = {
    key = KEYS[k + 1], id = ARGV[a + 1], job = job, ready = lane_key(ns, 'ready', job.queue, job.type),
    signal = ns .. 'signal:' .. job.type, finished = ns .. job.state,
  }
  check_type_once(plan.ready, 'zset')
  check_signal(plan.signal)
  check_type_once(plan.finished, 'zset')
  check_state_indexes(sp, job.type, job.state, 'pending')
  if named_queue(job.queue) then  -- its lane's indexes: from its finished state's to live
    plan.lane_from = lane_index(ns, job.state, job.queue, job.type)
    plan.lane_to = lane_index(ns, 'live', job.queue, job.type)
    check_type_once(plan.lane_from, 'zset')
    check_type_once(plan.lane_to, 'zset')
  end
  if job.key then
    plan.index = ns .. 'key:' .. job.key
    plan.index_held = index_names(plan.index, ARGV[a + 1])
  end
  if job.workflow then
    plan.workflow = workflow_reopen_check(sp, job)
  end
  return nil, plan
end

local function apply(_, _, plan)
  local job = plan.job
  redis.call('HSET', plan.key, 'state', 'pending', 'run_at', int(now),
    'max_attempts', int(job.attempts + 1))
  redis.call('HDEL', plan.key, 'finished_at', 'expires_at')
  redis.call('PERSIST', plan.key)
  if plan.index_held then
    redis.call('PERSIST', plan.index)
  end
  later_zrem(plan.finished, plan.id)
  later_zadd(plan.ready, ready_score(now, job.priority), plan.id)
  later_move(sp, plan.id, job.type, created_of(job), job.state, 'pending')
  if plan.lane_from then
    later_zrem(plan.lane_from, plan.id)
    later_zadd(plan.lane_to, int(created_of(job)), plan.id)
  end
  later_signal(plan.signal)
  if plan.workflow then
    workflow_reopen(plan.workflow, plan.key)
  end
  return 1
end

local results = for_each_job(1, 1, 3, 1, check, apply)
write_later(cap, signal_ttl)
return results
