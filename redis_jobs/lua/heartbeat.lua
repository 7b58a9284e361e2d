-- heartbeat.lua: extend one or more held leases to now + lease ms.
--
-- KEYS: 2 per job:  record (hash), leased zset of its type
-- ARGV[1]  now ms, or '' for the server's TIME
-- then 3 per job:  id, lease token, lease ms
--
-- Returns per job: 1 extended, 0 the token does not hold the job. A beat for a missing job
-- writes nothing: the record's existence is checked before any write. The lease expiry lives
-- in the leased zset's score only (the record does not repeat it).

local FIELDS = job_fields({'token'})
local now

local function check(k, a)
  check_type_once(KEYS[k + 2], 'zset')
  if held_job(KEYS[k + 1], ARGV[a + 2], FIELDS) == nil then
    return 0
  end
  return nil, true
end

local function apply(k, a)
  later_zadd(KEYS[k + 2], int(now + tonumber(ARGV[a + 3])), ARGV[a + 1])
  return 1
end

-- per call
now = now_ms(ARGV[1])
local results = for_each_job(0, 2, 1, 3, check, apply)
write_later(0, 0)
return results
