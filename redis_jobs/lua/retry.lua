-- retry.lua: put one or more held jobs back to pending at now + delay, keeping the error; or
-- release them (a closing runner's: due now, no error kept).
--
-- KEYS[1]  state index prefix, '{ns}:state:'
-- then 4 per job:  record (hash), leased zset, ready zset and signal list of its type
--
-- ARGV[1]  now ms, or '' for the server's TIME
-- ARGV[2]  signal list cap      ARGV[3]  signal TTL ms
-- then 5 per job:  id, lease token, delay ms, error text, flags: 'u' gives the attempt back
--                  (attempts - 1: RetryLater, a release), 'r' a release (no error kept)
--
-- Returns per job: 1 pending again, 0 (nothing written) the token does not hold the job.

local FIELDS = job_fields({'token', 'created_at', 'errors', 'priority'})
local now, sp

local function check(k, a)
  check_type_once(KEYS[k + 2], 'zset')
  check_type_once(KEYS[k + 3], 'zset')
  check_signal(KEYS[k + 4])
  local job = held_job(KEYS[k + 1], ARGV[a + 2], FIELDS)
  if job == nil then
    return 0
  end
  check_state_indexes(sp, job.type, 'active', 'pending')
  if string.find(ARGV[a + 5], 'r', 1, true) then
    return nil, job, false
  end
  return nil, job, with_error(job.errors, job.attempts, now, ARGV[a + 4])
end

local function apply(k, a, job, errors)
  local record, id, flags = KEYS[k + 1], ARGV[a + 1], ARGV[a + 5]
  local run_at = int(now + tonumber(ARGV[a + 3]))
  if errors then
    redis.call('HSET', record, 'state', 'pending', 'run_at', run_at, 'last_error', ARGV[a + 4],
      'errors', errors)
  else
    redis.call('HSET', record, 'state', 'pending', 'run_at', run_at)
  end
  if string.find(flags, 'u', 1, true) then
    redis.call('HSET', record, 'attempts', int(job.attempts - 1))
  end
  redis.call('HDEL', record, 'token', 'lease_until')
  later_zrem(KEYS[k + 2], id)
  later_zadd(KEYS[k + 3], ready_score(tonumber(run_at), job.priority), id)
  later_move(sp, id, job.type, created_of(job), 'active', 'pending')
  later_signal(KEYS[k + 4])
  return 1
end

-- per call
now = now_ms(ARGV[1])
sp = KEYS[1]
local results = for_each_job(1, 4, 3, 5, check, apply)
write_later(tonumber(ARGV[2]), tonumber(ARGV[3]))
return results
