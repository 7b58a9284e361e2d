-- finish.lua: complete, or fail for good, one or more held jobs (one state per call).
--
-- KEYS[1]  completed or failed zset   KEYS[2]  idempotency-key prefix, '{ns}:key:'
-- KEYS[3]  state index prefix, '{ns}:state:'   KEYS[4]  job types set
-- then 2 per job:  record (hash), leased zset of its type
--
-- ARGV[1]  now ms, or '' for the server's TIME
-- ARGV[2]  'completed' or 'failed'   ARGV[3]  retention ms   ARGV[4]  expiry margin ms
-- then 3 per job:  id, lease token, error text (kept when failing)
--
-- Returns per job: 1 finished, 0 (nothing written) the token does not hold the job. A job is
-- kept until max(now + retention, keep_until) by the script clock; its record and key index
-- expire in real time a margin later. When a job finished, jobs whose retention has ended are
-- pruned from the finished zset and the state indexes, a bounded number per call (prune_ended).

local now = now_ms(ARGV[1])
local finished, index_prefix, sp, types = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local state = ARGV[2]
local failing = state == 'failed'
local FIELDS = {'token', 'key', 'keep_until', 'created_at'}
if failing then
  FIELDS[#FIELDS + 1] = 'errors'
end
local call = {
  now = now, now_text = int(now), retain = tonumber(ARGV[3]), margin = tonumber(ARGV[4]),
  finished = finished, sp = sp,
}

check_type_once(finished, 'zset')

local function check(keys, args)
  check_type_once(keys[2], 'zset')
  local job = held_job(keys[1], args[2], FIELDS)
  if job == nil then
    return 0
  end
  check_state_indexes(sp, job.type, 'active', state)
  local errors = nil
  if failing then
    errors = with_error(job.errors, job.attempts, now, args[3])
  end
  local index = nil
  if job.key then
    index = index_prefix .. job.key
    if not index_names(index, args[1]) then
      index = nil
    end
  end
  return nil, {keys, args, job, index, errors}
end

local finished_any = false

local function apply(plan)
  local keys, args, job, index, errors = plan[1], plan[2], plan[3], plan[4], plan[5]
  finish(call, keys[1], args[1], job, state, 'active', keys[2], index,
    failing and args[3] or nil, errors)
  finished_any = true
  return 1
end

local results = for_each_job(4, 2, 4, 3, check, apply)
write_later(0, 0)
if finished_any then
  prune_ended(finished, state, sp, types, now)
end
return results
