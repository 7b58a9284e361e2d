-- progress.lua: keep what a handler reported of its progress with one or more held jobs.
--
-- KEYS: 2 per job:  record (hash), leased zset of its type
-- ARGV[1]  now ms, or '' for the server's TIME (unused: the call's shape is heartbeat's)
-- then 3 per job:  id, lease token, progress (JSON text)
--
-- Returns per job: 1 kept, 0 the token does not hold the job (nothing written), as heartbeat.

local FIELDS = job_fields({'token'})

local function check(k, a)
  check_type_once(KEYS[k + 2], 'zset')
  if held_job(KEYS[k + 1], ARGV[a + 2], FIELDS) == nil then
    return 0
  end
  return nil, true
end

local function apply(k, a)
  redis.call('HSET', KEYS[k + 1], 'progress', ARGV[a + 3])
  return 1
end

-- per call
return for_each_job(0, 2, 1, 3, check, apply)
