-- retry.lua: put one or more held jobs back to pending at now + delay, keeping the error.
--
-- KEYS[1]  state index prefix, '{ns}:state:'
-- then 4 per job:  record (hash), leased zset, ready zset and signal list of its type
--
-- ARGV[1]  now ms, or '' for the server's TIME
-- ARGV[2]  signal list cap      ARGV[3]  signal TTL ms
-- then 4 per job:  id, lease token, delay ms, error text
--
-- Returns per job: 1 pending again, 0 (nothing written) the token does not hold the job.

local now = now_ms(ARGV[1])
local sp = KEYS[1]
local cap, signal_ttl = tonumber(ARGV[2]), tonumber(ARGV[3])

local FIELDS = {'token', 'created_at', 'errors'}

local function check(keys, args)
  check_type_once(keys[2], 'zset')
  check_type_once(keys[3], 'zset')
  check_signal(keys[4])
  local job = held_job(keys[1], args[2], FIELDS)
  if job == nil then
    return 0
  end
  check_state_indexes(sp, job.type, 'active', 'pending')
  local errors = with_error(job.errors, job.attempts, now, args[4])
  return nil, {keys = keys, args = args, job = job, errors = errors}
end

local function apply(plan)
  local record, leased, ready, signal_key = unpack(plan.keys)
  local id = plan.args[1]
  local run_at = int(now + tonumber(plan.args[3]))
  redis.call('HSET', record, 'state', 'pending', 'run_at', run_at, 'last_error', plan.args[4],
    'errors', plan.errors)
  redis.call('HDEL', record, 'token', 'lease_until')
  later_zrem(leased, id)
  later_zadd(ready, run_at, id)
  later_move(sp, id, plan.job.type, created_of(plan.job), 'active', 'pending')
  later_signal(signal_key)
  return 1
end

local results = for_each_job(1, 4, 3, 4, check, apply)
write_later(cap, signal_ttl)
return results
