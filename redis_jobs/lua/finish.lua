-- finish.lua: complete, or fail for good, one or more held jobs (one state per call).
--
-- KEYS[1]  completed or failed zset   KEYS[2]  idempotency-key prefix, '{ns}:key:'
-- KEYS[3]  state index prefix, '{ns}:state:'   KEYS[4]  job types set
-- then 2 per job:  record (hash), leased zset of its type
--
-- ARGV[1]  now ms, or '' for the server's TIME
-- ARGV[2]  'completed' or 'failed'   ARGV[3]  retention ms   ARGV[4]  expiry margin ms
-- then 3 per job:  id, lease token, error text (kept when failing) or, when completing, the
--                  job's result (JSON text; '' for none)
--
-- Returns per job: 1 finished, 0 (nothing written) the token does not hold the job. A job is
-- kept until max(now + retention, keep_until) by the script clock; its record and key index
-- expire in real time a margin later. When a job finished, jobs whose retention has ended are
-- pruned from the finished zset and the state indexes, a bounded number per call (prune_ended).
-- A named queue's job (its leased zset names the lane) moves from its lane's live index to
-- that of its new state; a default queue's job writes nothing more.
-- A workflow job's dependents are released, or cancelled when it failed (see the workflow
-- helpers in common.lua; a plain job reads one field more, 'workflow', and nothing else).

local COMPLETE_FIELDS = job_fields({'token', 'key', 'keep_until', 'created_at', 'workflow'})
local FAIL_FIELDS = job_fields({'token', 'key', 'keep_until', 'created_at', 'errors',
  'workflow'})
-- What finish() reads of the call (see common.lua): every field set by each call.
local call = {}
local now, index_prefix, sp, ns, state, failing, fields, finished_any

local function check(k, a)
  check_type_once(KEYS[k + 2], 'zset')
  local job = held_job(KEYS[k + 1], ARGV[a + 2], fields)
  if job == nil then
    return 0
  end
  check_state_indexes(sp, job.type, 'active', state)
  local lane = lane_of_source(ns, KEYS[k + 2])
  if lane then  -- a named queue's job: its lane's indexes (finish() writes them)
    check_type_once(ns .. 'lane:live:' .. lane, 'zset')
    check_type_once(ns .. 'lane:' .. state .. ':' .. lane, 'zset')
  end
  local errors = nil
  if failing then
    errors = with_error(job.errors, job.attempts, now, ARGV[a + 3])
  end
  local index = false
  if job.key then
    index = index_prefix .. job.key
    if not index_names(index, ARGV[a + 1]) then
      index = false
    end
  end
  if job.workflow then
    job.workflow_plan = workflow_check(sp, KEYS[k + 1], ARGV[a + 1], job, state, true, now)
  end
  return nil, job, index, errors
end

local function apply(k, a, job, index, errors)
  finish(call, KEYS[k + 1], ARGV[a + 1], job, state, 'active', KEYS[k + 2], index,
    failing and ARGV[a + 3] or nil, errors)
  if not failing and ARGV[a + 3] ~= '' then
    redis.call('HSET', KEYS[k + 1], 'result', ARGV[a + 3])
  end
  if job.workflow_plan then
    workflow_apply(job.workflow_plan, now, call.retain, call.margin)
  end
  finished_any = true
  return 1
end

-- per call
now = now_ms(ARGV[1])
local finished, types = KEYS[1], KEYS[4]
index_prefix, sp = KEYS[2], KEYS[3]
ns = namespace_of(sp)
state = ARGV[2]
failing = state == 'failed'
fields = failing and FAIL_FIELDS or COMPLETE_FIELDS
finished_any = false
call.now, call.now_text = now, int(now)
call.retain, call.margin = tonumber(ARGV[3]), tonumber(ARGV[4])
call.finished, call.sp = finished, sp

check_type_once(finished, 'zset')
local results = for_each_job(4, 2, 4, 3, check, apply)
write_later(0, 0)
if finished_any then
  prune_ended(finished, state, sp, types, now)
end
return results
