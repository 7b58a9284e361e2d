-- finish.lua: complete, or fail for good, one or more held jobs (one state per call).
--
-- KEYS[1]  completed or failed zset   KEYS[2]  counts hash
-- KEYS[3]  idempotency-key prefix, '{ns}:key:'   KEYS[4]  state index prefix, '{ns}:state:'
-- then 2 per job:  record (hash), leased zset of its type
--
-- ARGV[1]  now ms, or '' for the server's TIME
-- ARGV[2]  'completed' or 'failed'   ARGV[3]  retention ms   ARGV[4]  expiry margin ms
-- then 3 per job:  id, lease token, error text (kept when failing)
--
-- Returns per job: 1 finished, 0 (nothing written) the token does not hold the job. A job is
-- kept until max(now + retention, keep_until) by the script clock; its record and key index
-- expire in real time a margin later. When a job finished, entries of the finished zset whose
-- retention has ended are pruned, a bounded number per call.

local PRUNE_BATCH = 64

local now = now_ms(ARGV[1])
local finished, counts, index_prefix, sp = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local state, retain, margin = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])

check_type_once(finished, 'zset')
check_type_once(counts, 'hash')

local function check(keys, args)
  check_type_once(keys[2], 'zset')
  local job = held_job(keys[1], args[2], {'key', 'keep_until', 'created_at', 'errors'})
  if job == nil then
    return 0
  end
  check_state_indexes(sp, job.type, 'active', state)
  local errors = nil
  if state == 'failed' then
    errors = with_error(job.errors, job.attempts, now, args[3])
  end
  local index, index_held = nil, false
  if job.key then
    index = index_prefix .. job.key
    index_held = index_names(index, args[1])
  end
  return nil, {
    key = keys[1], id = args[1], job = job, state = state, now = now, retain = retain,
    margin = margin, source = keys[2], from = 'active', finished = finished, counts = counts,
    index = index, index_held = index_held, error = state == 'failed' and args[3] or nil,
    errors = errors, sp = sp,
  }
end

local finished_any = false

local function apply(plan)
  finish(plan)
  finished_any = true
  return 1
end

local results = for_each_job(4, 2, 4, 3, check, apply)
write_later(0, 0)
if finished_any then
  local ended = redis.call('ZRANGE', finished, '-inf', now, 'BYSCORE', 'LIMIT', 0, PRUNE_BATCH)
  if #ended > 0 then
    redis.call('ZREM', finished, unpack(ended))
  end
end
return results
