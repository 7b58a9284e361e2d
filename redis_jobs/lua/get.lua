-- get.lua: read a job record, unless retention has ended it (judged by the script clock).
--
-- KEYS[1]  job record (hash)
-- ARGV[1]  now ms, or '' for the server's TIME
--
-- Returns the record as field/value pairs, or nil when it does not exist or has expired.

local now = now_ms(ARGV[1])
local job = load_job(KEYS[1], {'payload', 'expires_at'})
if job == nil or not is_alive(job, KEYS[1], now) then
  return nil
end
if not job.payload then
  refuse('job record ' .. KEYS[1] .. ' has no payload field')
end
return redis.call('HGETALL', KEYS[1])
