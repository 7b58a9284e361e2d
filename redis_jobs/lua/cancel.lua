-- cancel.lua: a pending or active job becomes cancelled (finished); an active one's token goes.
--
-- KEYS[1]  namespace prefix, '{ns}:' (the ready, leased, key, state keys are spelled from it)
-- KEYS[2]  job record (hash)
-- ARGV[1]  now ms, or '' for the server's TIME
-- ARGV[2]  id    ARGV[3]  retention ms (as failed)    ARGV[4]  expiry margin ms
--
-- Returns 1 cancelled, 0 (nothing written) finished or unknown. The holder of a revoked lease
-- finds its token gone: its heartbeat and settle are refused. Cancelled jobs whose retention
-- has ended are pruned after it (prune_ended). A workflow job's dependents are cancelled with
-- it, unless on a continue edge (released then; see the workflow helpers in common.lua).

local now = now_ms(ARGV[1])
local ns, key, id = KEYS[1], KEYS[2], ARGV[2]
local sp = ns .. 'state:'

local job = load_job(key, {'key', 'keep_until', 'created_at', 'expires_at', 'workflow',
  'queue'})
if job == nil or (job.state ~= 'pending' and job.state ~= 'active') then
  return 0
end
local source = lane_key(ns, job.state == 'pending' and 'ready' or 'leased', job.queue, job.type)
local cancelled = ns .. 'cancelled'
check_type_once(source, 'zset')
check_type_once(cancelled, 'zset')
check_state_indexes(sp, job.type, job.state, 'cancelled')
check_lane_finish(ns, job.queue, job.type, 'cancelled')
local index = nil
if job.key then
  index = ns .. 'key:' .. job.key
  if not index_names(index, id) then
    index = nil
  end
end

local workflow = job.workflow and workflow_check(sp, key, id, job, 'cancelled', true, now)
local call = {
  now = now, now_text = int(now), retain = tonumber(ARGV[3]), margin = tonumber(ARGV[4]),
  finished = cancelled, sp = sp,
}
finish(call, key, id, job, 'cancelled', job.state, source, index, nil, nil)
if workflow then
  workflow_apply(workflow, now, call.retain, call.margin)
end
write_later(0, 0)
prune_ended(cancelled, 'cancelled', sp, ns .. 'types', now)
return 1
