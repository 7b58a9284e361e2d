-- workflow_jobs.lua: read a workflow's jobs still stored, in the order they were stored.
--
-- KEYS[1]  namespace prefix, '{ns}:' (the records are spelled from it)
-- KEYS[2]  the workflow's hash, '{ns}:workflow:<id>'
-- ARGV[1]  now ms, or '' for the server's TIME
--
-- Returns {id, fields, id, fields, ...}: fields as HGETALL gives them; empty for an unknown
-- workflow. A job deleted, or whose retention has ended (by the script clock), is left out, as
-- is a record of another job stored since under a listed id (its 'workflow' is not this one).

local JOB = job_fields({'payload', 'expires_at', 'workflow'})

-- per call
local now = now_ms(ARGV[1])
local ns, wf = KEYS[1], KEYS[2]
local workflow_id = string.sub(wf, #ns + #'workflow:' + 1)
local listed = read('hash', 'HGET', wf, 'jobs')
if not listed then
  return {}
end
local reply = {}
for _, id in ipairs(decoded(listed, 'job list of ' .. wf)) do
  local key = ns .. 'job:' .. id
  local job = load_job(key, JOB)
  if job ~= nil and job.payload and job.workflow == workflow_id and is_alive(job, key, now) then
    reply[#reply + 1] = id
    reply[#reply + 1] = redis.call('HGETALL', key)
  end
end
return reply
