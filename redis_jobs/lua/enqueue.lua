-- enqueue.lua: store one or more pending jobs, each unless a live job holds its idempotency key.
--
-- KEYS[1]  job record prefix, '{ns}:job:'
-- KEYS[2]  completed zset   KEYS[3]  failed zset      KEYS[4]  cancelled zset
-- KEYS[5]  state index prefix, '{ns}:state:'          KEYS[6]  job types set
-- then 4 per job:  record (hash), ready zset of its type, signal list of its type,
--                  idempotency-key index (when the job has no key: the index prefix, untouched)
--
-- ARGV[1]  now ms, or '' for the server's TIME
-- ARGV[2]  signal list cap      ARGV[3]  signal TTL ms
-- then 13 per job:  id, type, payload (JSON text), max attempts, delay ms,
--                   run_at ms or '' (now + delay), timeout ms or '', keep_until ms or '',
--                   flags ('k' has a key, 't' has a trace context), key, trace context,
--                   max stalls, priority (its ready score: ready_score, in common.lua),
--                   queue ('' for the default queue; another's lane is added to the set
--                   KEYS[6] .. ':lanes', '<queue>/<type>', which stats walks, and the job to
--                   its lane's live index, '{ns}:lane:live:<queue>/<type>')
--
-- Returns per job: 1 stored (or already stored with the same id, type and payload, as when a
-- client retries a call whose reply was lost), 0 a live job holds the key, -1 the id is taken
-- by a different live job. A key holder or id holder whose retention has ended is deleted.
--
-- The jobs are checked and stored one at a time, in order, as for_each_job does it (a job whose
-- check refuses gets the refusal as its result and writes nothing), with little work a job:
-- each job's KEYS and ARGV are read in place, a job without optional fields is written by one
-- literal HSET, a batch checks a type's keys and finds their write buckets once, and a call
-- of one job writes at once instead of queuing. Measured under callgrind on redis-server:
-- ~82k -> ~62k instructions a job of a 1,000-job enqueue_many, ~219k -> ~175k a one-job call;
-- then ~200k -> ~175k a one-job call, which makes no table or function of its own but its
-- result: check and apply are made once, when the library loads (see library.py), and read the
-- call's values from the locals below, which each call sets first.

local EXISTING = job_fields({'payload', 'expires_at', 'created_at', 'queue'})
local HOLDER = job_fields({'expires_at', 'created_at', 'queue'})
local now, now_text, prefix, completed, failed, cancelled, sp, ns, types, cap, signal_ttl
-- A call of one job reads each key once and writes at once, caching nothing: for one job a
-- table costs more than it saves. A batch checks a type's keys once (known_types: whether the
-- types set holds it; checked_of: per job type, the ready zset and signal list that its last
-- checked job named (a job naming others is checked again), then the write buckets (later_*)
-- of that ready zset, of the type's pending state indexes and of that signal list, made by
-- the first job of the type stored) and queues its writes (later_*), made at the end in one
-- command a key. A batch whose records none exist when it starts (unseen: one EXISTS of
-- them all) reads no job's record, but that of a job naming a record an earlier job of the
-- call named: only this call can have made it since (a stale holder it deletes existed).
local alone, known_types, checked_of, unseen

-- A job's KEYS and ARGV are read in place (k, a: the offsets of its first key and argument less
-- one), and check hands apply its plan as return values: no table per job for either. For a
-- lone job (alone) the plan also holds what it read of its type's keys: whether the types set
-- has the type (known), the signal list's length and the names of the pending state indexes.
local function check(k, a)
  local record, index = KEYS[k + 1], KEYS[k + 4]
  local id, job_type, flags = ARGV[a + 1], ARGV[a + 2], ARGV[a + 9]
  local has_key = flags ~= '' and string.find(flags, 'k', 1, true) ~= nil
  local ready, signal_key = KEYS[k + 2], KEYS[k + 3]
  local known, signals, all_key, typed_key
  local live = false
  if ARGV[a + 14] ~= '' then  -- a named queue's job: its lane's live index too
    live = lane_index(ns, 'live', ARGV[a + 14], job_type)
    if alone then
      check_type(live, 'zset')
    else
      check_type_once(live, 'zset')
    end
  end
  if alone then
    known = read('set', 'SISMEMBER', types, job_type) == 1
    check_type(ready, 'zset')
    signals = check_type(signal_key, 'list')
    all_key, typed_key = state_names(sp, 'pending', job_type)
    check_type(all_key, 'zset')
    check_type(typed_key, 'zset')
  else
    local checked = checked_of[job_type]
    if not checked or checked[1] ~= ready or checked[2] ~= signal_key then
      if known_types[job_type] == nil then
        known_types[job_type] = read('set', 'SISMEMBER', types, job_type) == 1
      end
      check_type_once(ready, 'zset')
      check_signal(signal_key)
      check_state_indexes(sp, job_type, 'pending')
      checked_of[job_type] = {ready, signal_key}
    end
  end
  local stale = nil
  local existing = false
  if unseen and not unseen[record] then
    unseen[record] = true  -- a later job of the call naming it is checked in full
  else
    existing = check_type(record, 'hash') > 0 and load_job(record, EXISTING)
  end
  if existing then
    if is_alive(existing, record, now) then
      if existing.type == job_type and existing.payload == ARGV[a + 3] then
        return 1
      end
      return -1
    end
    stale = {{id = id, job = existing}}
  end
  if has_key then
    local holder = get_string(index)
    if holder and holder ~= id then
      local holder_key = prefix .. holder
      local held = load_job(holder_key, HOLDER)
      if held then
        if is_alive(held, holder_key, now) then
          return 0
        end
        stale = stale or {}
        stale[#stale + 1] = {id = holder, job = held}
      end
    end
  end
  if stale then
    check_type_once(completed, 'zset')
    check_type_once(failed, 'zset')
    check_type_once(cancelled, 'zset')
    for _, entry in ipairs(stale) do
      check_state_indexes(sp, entry.job.type, entry.job.state)
      if named_queue(entry.job.queue) then
        entry.lane = lane_index(ns, entry.job.state, entry.job.queue, entry.job.type)
        check_type_once(entry.lane, 'zset')
      end
    end
  end
  local run_at = now_text
  if ARGV[a + 6] ~= '' then
    run_at = int(tonumber(ARGV[a + 6]))
  elseif ARGV[a + 5] ~= '0' then
    run_at = int(now + tonumber(ARGV[a + 5]))
  end
  return nil, live, stale, run_at, has_key, known, signals, all_key, typed_key
end

-- live: the job's lane's live index (a named queue's job), else false.
local function apply(k, a, live, stale, run_at, has_key, known, signals, all_key, typed_key)
  local record, id, job_type = KEYS[k + 1], ARGV[a + 1], ARGV[a + 2]
  if stale then
    for _, entry in ipairs(stale) do
      redis.call('DEL', prefix .. entry.id)
      later_zrem(completed, entry.id)
      later_zrem(failed, entry.id)
      later_zrem(cancelled, entry.id)
      later_move(sp, entry.id, entry.job.type, 0, entry.job.state, nil)
      if entry.lane then
        later_zrem(entry.lane, entry.id)
      end
    end
  end
  local timeout, keep_until, flags = ARGV[a + 7], ARGV[a + 8], ARGV[a + 9]
  local priority, queue = ARGV[a + 13], ARGV[a + 14]
  local score = run_at
  if priority ~= '0' then
    score = ready_score(tonumber(run_at), tonumber(priority))
  end
  if timeout == '' and keep_until == '' and flags == '' and priority == '0' and queue == '' then
    redis.call('HSET', record, 'type', job_type, 'payload', ARGV[a + 3], 'state', 'pending',
      'attempts', '0', 'max_attempts', ARGV[a + 4], 'run_at', run_at, 'created_at', now_text,
      'max_stalls', ARGV[a + 12])
  else
    local fields = {'type', job_type, 'payload', ARGV[a + 3], 'state', 'pending', 'attempts',
      '0', 'max_attempts', ARGV[a + 4], 'run_at', run_at, 'created_at', now_text, 'max_stalls',
      ARGV[a + 12]}
    if priority ~= '0' then
      fields[#fields + 1] = 'priority'
      fields[#fields + 1] = priority
    end
    if queue ~= '' then
      fields[#fields + 1] = 'queue'
      fields[#fields + 1] = queue
      redis.call('SADD', types .. ':lanes', queue .. '/' .. job_type)
    end
    if timeout ~= '' then
      fields[#fields + 1] = 'timeout_ms'
      fields[#fields + 1] = timeout
    end
    if keep_until ~= '' then
      fields[#fields + 1] = 'keep_until'
      fields[#fields + 1] = keep_until
    end
    if has_key then
      fields[#fields + 1] = 'key'
      fields[#fields + 1] = ARGV[a + 10]
      redis.call('SET', KEYS[k + 4], id)
    end
    if string.find(flags, 't', 1, true) then
      fields[#fields + 1] = 'trace_context'
      fields[#fields + 1] = ARGV[a + 11]
    end
    redis.call('HSET', record, unpack(fields))
  end
  if live and not alone then
    later_zadd(live, now_text, id)
  end
  if alone then
    if live then
      redis.call('ZADD', live, now_text, id)
    end
    redis.call('ZADD', KEYS[k + 2], score, id)
    redis.call('ZADD', all_key, now_text, id)
    redis.call('ZADD', typed_key, now_text, id)
    if not known then
      redis.call('SADD', types, job_type)
    end
    push_signals(KEYS[k + 3], signals, ONE_SIGNAL, 1, 1, cap, signal_ttl)
    return 1
  end
  local checked = checked_of[job_type]  -- this job's: check made it
  local ready, all, typed, signal = checked[3], checked[4], checked[5], checked[6]
  if ready == nil then
    local all_key, typed_key = state_index(sp, 'pending', job_type)
    ready, all = bucket('zadd', checked[1]), bucket('zadd', all_key)
    typed, signal = bucket('zadd', typed_key), bucket('signal', checked[2])
    checked[3], checked[4], checked[5], checked[6] = ready, all, typed, signal
  end
  ready[#ready + 1] = score
  ready[#ready + 1] = id
  all[#all + 1] = now_text
  all[#all + 1] = id
  typed[#typed + 1] = now_text
  typed[#typed + 1] = id
  signal[#signal + 1] = '1'
  if not known_types[job_type] then
    later_sadd(types, job_type)
    known_types[job_type] = true
  end
  return 1
end

-- per call
now = now_ms(ARGV[1])
now_text = int(now)
prefix, completed, failed, cancelled = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
sp, types = KEYS[5], KEYS[6]
ns = namespace_of(sp)
cap, signal_ttl = tonumber(ARGV[2]), tonumber(ARGV[3])
local jobs = (#ARGV - 3) / 14
alone = jobs == 1
if alone then
  known_types, checked_of, unseen = nil, nil, nil
else
  known_types, checked_of, unseen = {}, {}, {}
  local records = {}
  for job = 0, jobs - 1 do
    records[job + 1] = KEYS[7 + job * 4]
  end
  if redis.call('EXISTS', unpack(records)) > 0 then
    unseen = nil
  end
end

local results = {}
for job = 0, jobs - 1 do
  local k, a = 6 + job * 4, 3 + job * 14
  local ok, result, go, stale, run_at, has_key, known, signals, all_key, typed_key =
    pcall(check, k, a)
  if not ok then
    results[job + 1] = refusal(result)
  elseif result == nil then
    results[job + 1] = apply(k, a, go, stale, run_at, has_key, known, signals, all_key,
      typed_key)
  else
    results[job + 1] = result
  end
end
write_later(cap, signal_ttl)
return results
