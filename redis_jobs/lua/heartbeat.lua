-- heartbeat.lua: extend one or more held leases to now + lease ms.
--
-- KEYS: 2 per job:  record (hash), leased zset of its type
-- ARGV[1]  now ms, or '' for the server's TIME
-- then 3 per job:  id, lease token, lease ms
--
-- Returns per job: 1 extended, 0 the token does not hold the job. A beat for a missing job
-- writes nothing: the record's existence is checked before any write. The lease expiry lives
-- in the leased zset's score only (the record does not repeat it).

local now = now_ms(ARGV[1])
local FIELDS = {'token'}

local function check(keys, args)
  check_type_once(keys[2], 'zset')
  if held_job(keys[1], args[2], FIELDS) == nil then
    return 0
  end
  return nil, {keys[2], int(now + tonumber(args[3])), args[1]}
end

local function apply(plan)
  later_zadd(plan[1], plan[2], plan[3])
  return 1
end

local results = for_each_job(0, 2, 1, 3, check, apply)
write_later(0, 0)
return results
