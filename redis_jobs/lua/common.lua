-- common.lua: the helpers of every function of this package's library (redis_jobs.library puts
-- it first, then each script body as the callback of one function, which calls begin first).
-- Like the scripts, this text is fixed: no script source is ever built from input; names, ids,
-- types and payloads reach the scripts only through KEYS and ARGV.
--
-- Every script checks first and writes last. Redis does not roll back a script that fails
-- part-way, so each one reads and validates every key it will touch (type, record fields)
-- before its first write (a type check is the cheapest read of the type, or a read the script
-- needs anyway: a ZRANGE, SISMEMBER, LLEN or GET that Redis refuses on a key of another
-- type); refuse() raises a "JOBSCRIPT ..." error, which the driver raises as RedisScriptError,
-- and nothing has been written by then. Scripts that take a batch of jobs
-- (for_each_job) check and write one job at a time: a job whose check refuses gets the
-- refusal as its result, nothing of it is written, and the other jobs go on.
--
-- TIME is read before writes: fine on Redis >= 7, where scripts are always replicated by their
-- effects (lua-replicate-commands is gone), so replicas receive the values written, not TIME.

local CORE = {'type', 'state', 'attempts', 'max_attempts', 'run_at'}
local NUMERIC = {
  attempts = true, max_attempts = true, run_at = true, lease_until = true,
  expires_at = true, keep_until = true, timeout_ms = true, created_at = true, finished_at = true,
  stalls = true, max_stalls = true, priority = true, waiting = true,
}
local STATES = {pending = true, active = true, completed = true, failed = true, cancelled = true}
local MAX_ERRORS = 20

local REFUSAL = 'JOBSCRIPT '

-- The running call's keys and arguments (set by begin): the script bodies read KEYS and ARGV.
local KEYS, ARGV = {}, {}

local function refuse(why)
  error({err = REFUSAL .. why})
end

-- The text of an error caught in a check (a refusal, or a Redis error from a read).
local function refusal(caught)
  local text = type(caught) == 'table' and caught.err or tostring(caught)
  if string.sub(text, 1, #REFUSAL) ~= REFUSAL then
    text = REFUSAL .. text
  end
  return text
end

-- Runs a batch: KEYS and ARGV hold `shared` leading values, then a fixed number per job.
-- check(k, a) reads only, the job's keys and arguments in place (KEYS[k + 1], ARGV[a + 1], ...:
-- k and a are the offsets of its first key and argument less one), and returns (result), or
-- (nil, plan, ...) with up to three plan values, never nil the first; apply(k, a, plan, ...)
-- writes and returns the result. Returns one result per job; a refused job's result is its
-- refusal text. No table is made per job but the plan's own.
local function for_each_job(shared_keys, keys_per_job, shared_args, args_per_job, check, apply)
  local results = {}
  local count = (#ARGV - shared_args) / args_per_job
  for job = 0, count - 1 do
    local k, a = shared_keys + job * keys_per_job, shared_args + job * args_per_job
    local ok, result, plan, second, third = pcall(check, k, a)
    if not ok then
      results[job + 1] = refusal(result)
    elseif plan ~= nil then
      results[job + 1] = apply(k, a, plan, second, third)
    else
      results[job + 1] = result
    end
  end
  return results
end

-- The script clock: the caller's injected time when given, else the server's TIME.
local function now_ms(arg)
  if arg ~= '' then
    return tonumber(arg)
  end
  local time = redis.call('TIME')
  return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end

-- Integers as plain digits (Lua would print large numbers in exponent form).
local function int(number)
  return string.format('%d', number)
end

-- A lane: the jobs of one named queue and type. Its ready (pending) and leased (active) zsets
-- are '{ns}:ready:<type>' and '{ns}:leased:<type>' for the default queue (a record without a
-- 'queue' field, as before named queues), and '{ns}:qready:<queue>/<type>',
-- '{ns}:qleased:<queue>/<type>' for another (a queue name holds no '/').
local function lane_key(ns, kind, queue, job_type)
  if not queue or queue == 'default' then
    return ns .. kind .. ':' .. job_type
  end
  return ns .. 'q' .. kind .. ':' .. queue .. '/' .. job_type
end

-- A named queue's own indexes, per lane ('<queue>/<type>'), score = created_at as in the state
-- indexes: '{ns}:lane:live:<queue>/<type>' its pending and active jobs (a claim, a retry or a
-- release leaves it as it is), '{ns}:lane:<state>:<queue>/<type>' its completed, failed or
-- cancelled ones (kept with the state indexes: settles add, requeue, purge and prune remove).
-- list_jobs(queue=...) pages them and queue_stats counts them. The default queue has none: its
-- jobs (and those stored before named queues) are the state indexes' others, so a default
-- job's settle writes nothing more.
local function named_queue(queue)
  return queue and queue ~= '' and queue ~= 'default'
end

local function lane_index(ns, what, queue, job_type)
  return ns .. 'lane:' .. what .. ':' .. queue .. '/' .. job_type
end

-- The lane '<queue>/<type>' of a named queue's ready or leased zset key, else nil (default).
local Q_BYTE = 113  -- 'q' (the library's load runs without the string library)
local function lane_of_source(ns, source)
  if string.byte(source, #ns + 1) ~= Q_BYTE then
    return nil
  end
  local rest = string.sub(source, #ns + 1)
  if string.sub(rest, 1, 8) == 'qleased:' then
    return string.sub(rest, 9)
  elseif string.sub(rest, 1, 7) == 'qready:' then
    return string.sub(rest, 8)
  end
  return nil
end

-- Priorities in the ready zsets: a pending job's score is run_at - priority * BAND, so that a
-- zset holds one band of scores per priority, the highest priority first, each by run_at (run_at
-- is below 2500-01-01, under 2^44 ms; |priority| <= 100 keeps every score exact in a double). A
-- priority-0 job's score is its run_at, as before priorities.
local BAND = 17592186044416  -- 2^44

local function ready_score(run_at, priority)
  if priority and priority ~= 0 then
    return int(run_at - priority * BAND)
  end
  return int(run_at)
end

-- Type checks read the key with the cheapest command of its type (a size, an integer reply):
-- on a key of another type Redis refuses the read, and nothing has been written. A missing
-- key reads as empty. Cheaper than TYPE, whose status reply becomes a table.
local SIZE_OF = {zset = 'ZCARD', hash = 'HLEN', list = 'LLEN', set = 'SCARD', string = 'STRLEN'}

local function wrong_type(key, wanted)
  local kind = redis.call('TYPE', key)['ok']
  refuse('key ' .. key .. ' holds a ' .. kind .. ', expected a ' .. wanted)
end

-- The size of the key (0 when it does not exist); refuses unless it has the wanted type.
local function check_type(key, wanted)
  local size = redis.pcall(SIZE_OF[wanted], key)
  if type(size) == 'table' then
    wrong_type(key, wanted)
  end
  return size
end

-- Per-call state of the helpers below (begin clears it). Each table is made by the first
-- helper of a call that needs it: a table made, then collected, is the costliest step of a
-- small call (measured under callgrind: ~2k instructions each; these tables, made by begin
-- for every call, cost a one-job enqueue some 25k of its ~200k).
local checked, field_names, later_order, later_of, signal_length, index_names_of
-- What a call's workflow checks planned (workflow_check): dependents by id, workflows' counts.
local workflow_children, workflow_open

-- check_type for keys whose existence does not matter (sets, lists, zsets): each key is
-- checked once per script run. Scripts only ever write a key with the type checked here.
local function check_type_once(key, wanted)
  if checked == nil then
    checked = {}
  end
  if checked[key] ~= wanted then
    check_type(key, wanted)
    checked[key] = wanted
  end
end

-- Whether a zset key may be written: check_type_once's answer without refusing (a key of
-- another type is left alone, its index not kept). For writes whose caller cannot check first
-- (finish() called by claim's stall failures); callers that can check call check_type_once.
local function zset_writable(key)
  if checked == nil then
    checked = {}
  end
  local was = checked[key]
  if was == nil then
    was = type(redis.pcall('ZCARD', key)) == 'table' and 'other' or 'zset'
    checked[key] = was
  end
  return was == 'zset'
end

-- The value of a string key (false when absent); refuses unless it is a string. One GET.
local function get_string(key)
  local value = redis.pcall('GET', key)
  if type(value) == 'table' then
    wrong_type(key, 'string')
  end
  return value
end

-- A read of a key of the wanted type (ZRANGE, SISMEMBER, ...): its reply; refuses on a key
-- of another type, so the read is the key's type check too.
local function read(wanted, command, key, ...)
  local reply = redis.pcall(command, key, ...)
  if type(reply) == 'table' and reply['err'] then
    wrong_type(key, wanted)
  end
  return reply
end

-- Each band of a ready zset that holds a member: fn(base, head_score) in score order (highest
-- priority first), until fn returns true. One ZRANGE per band visited (the first is the key's
-- type check): the cost follows the priorities present, not the jobs.
local function each_band(key, fn)
  local from = '-inf'
  while true do
    local head = read('zset', 'ZRANGE', key, from, '+inf', 'BYSCORE', 'LIMIT', 0, 1, 'WITHSCORES')
    if #head == 0 then
      return
    end
    local score = tonumber(head[2])
    local base = math.floor(score / BAND) * BAND
    if fn(base, score) then
      return
    end
    from = int(base + BAND)
  end
end

-- The HMGET field names for a list of optional fields: CORE first. A script's constant list is
-- passed to job_fields when the library loads, which builds its names once for every call (a
-- table made per call costs ~2k instructions); any other list's names are built once per call.
local loaded_names = {}

-- Plain loops: the library's load runs without unpack and ipairs.
local function names_from(optional)
  local names = {}
  for index = 1, #CORE do
    names[index] = CORE[index]
  end
  for index = 1, #optional do
    names[#CORE + index] = optional[index]
  end
  return names
end

-- The list, its names built now (load time only: a list made by a call would never be freed).
local function job_fields(optional)
  loaded_names[optional] = names_from(optional)
  return optional
end

local function names_of(optional)
  local names = loaded_names[optional]
  if names then
    return names
  end
  if field_names == nil then
    field_names = {}
  end
  names = field_names[optional]
  if not names then
    names = names_from(optional)
    field_names[optional] = names
  end
  return names
end

local function number_field(key, name, value)
  local number = tonumber(value)
  if number == nil then
    refuse('job record ' .. key .. ' has a non-numeric ' .. name .. ' field')
  end
  return number
end

-- The record at key as a table (nil when absent): the CORE fields, which must be present and
-- valid, plus the optional fields asked for (false when missing). Numeric fields are numbers.
-- One HMGET does the type check too: on a key of another type it fails, and is refused.
local function load_job(key, optional)
  local names = names_of(optional)
  local values = redis.pcall('HMGET', key, unpack(names))
  if values['err'] then
    refuse('key ' .. key .. ' is not a job record: ' .. values['err'])
  end
  local job_type, state, attempts, max_attempts, run_at = unpack(values, 1, 5)
  if not (job_type and state and attempts and max_attempts and run_at) then
    local found = false
    for index = 1, #names do
      found = found or values[index] ~= false
    end
    if not found and redis.call('EXISTS', key) == 0 then
      return nil
    end
    for index, name in ipairs(CORE) do
      if not values[index] then
        refuse('job record ' .. key .. ' has no ' .. name .. ' field')
      end
    end
  end
  if not STATES[state] then
    refuse('job record ' .. key .. ' has an unknown state')
  end
  local job = {
    type = job_type, state = state, attempts = number_field(key, 'attempts', attempts),
    max_attempts = number_field(key, 'max_attempts', max_attempts),
    run_at = number_field(key, 'run_at', run_at),
  }
  for index = 6, #names do
    local name, value = names[index], values[index]
    if value and NUMERIC[name] then
      value = number_field(key, name, value)
    end
    job[name] = value
  end
  return job
end

-- The job at `key` if `token` holds its lease (it is active under that token), else nil.
-- Loads the token and whatever `optional` fields the caller needs (a list with 'token' first).
local function held_job(key, token, optional)
  local job = load_job(key, optional)
  if job == nil or job.state ~= 'active' or job.token ~= token then
    return nil
  end
  return job
end

-- Pending and active jobs are alive; a finished one until its retention ends (load expires_at).
local function is_alive(job, key, now)
  if job.state == 'pending' or job.state == 'active' then
    return true
  end
  if not job.expires_at then
    refuse('finished job record ' .. key .. ' has no expires_at field')
  end
  return now < job.expires_at
end

-- The 'errors' field (JSON [[attempt, at, error], ...], newest last) with one more entry, the
-- last MAX_ERRORS kept. Computed in a script's checks; written by its writes.
local function with_error(errors, attempt, at, text)
  local list = {}
  if errors and errors ~= '' then
    local ok, decoded = pcall(cjson.decode, errors)
    if not ok or type(decoded) ~= 'table' then
      refuse('job record has a malformed errors field')
    end
    list = decoded
  end
  list[#list + 1] = {attempt, at, text}
  while #list > MAX_ERRORS do
    table.remove(list, 1)
  end
  return cjson.encode(list)
end

-- When the job was created (records written before created_at existed: its run_at).
local function created_of(job)
  return job.created_at or job.run_at
end

-- Whether the idempotency-key index at index_key still names job id (read before writing).
local function index_names(index_key, id)
  return get_string(index_key) == id
end

-- Writes to sorted sets, signal lists and TTLs of finished sets, gathered
-- while a script runs and made in one go at its end: fewer calls. No check reads these keys,
-- so deferring them changes no outcome, and every one was type-checked before it was queued.
-- One bucket per (kind, key), made in the order first used: {kind, key, value, ...} (one
-- table a bucket: a table made is the costliest part of queuing a write).
local function bucket(kind, key)
  if later_of == nil then
    later_of, later_order = {}, {}
  end
  local of = later_of[kind]
  if not of then
    of = {}
    later_of[kind] = of
  end
  local found = of[key]
  if not found then
    found = {kind, key}
    of[key] = found
    later_order[#later_order + 1] = found
  end
  return found
end

local function later_zadd(key, score, member)
  local values = bucket('zadd', key)
  values[#values + 1] = score
  values[#values + 1] = member
end

local function later_zrem(key, member)
  local values = bucket('zrem', key)
  values[#values + 1] = member
end

-- Signal list lengths (signal_length), read by check_signal (the read is the list's type check).
local function check_signal(key)
  if signal_length == nil then
    signal_length = {}
  end
  if signal_length[key] == nil then
    signal_length[key] = check_type(key, 'list')
  end
end

-- A wake-up signal for idle runners of a type (see write_later); check_signal(key) first.
local function later_signal(key)
  local values = bucket('signal', key)
  values[#values + 1] = '1'
end

-- Pushes n of values[first], values[first + 1], ... onto the signal list key, which holds
-- length signals (its type checked), no more than its cap allows, and starts its expiry when
-- it was empty (see write_later); its new length.
local ONE_SIGNAL = {'1'}
local function push_signals(key, length, values, first, n, cap, signal_ttl)
  local pushes = math.min(n, cap - length)
  if pushes <= 0 then
    return length
  end
  redis.call('LPUSH', key, unpack(values, first, first + pushes - 1))
  if length == 0 then
    redis.call('PEXPIRE', key, signal_ttl)
  end
  return length + pushes
end

local function later_sadd(key, member)
  local values = bucket('sadd', key)
  values[#values + 1] = member
end

-- The namespace prefix '{ns}:' of a state index prefix '{ns}:state:'.
local function namespace_of(sp)
  return string.sub(sp, 1, #sp - #'state:')
end

-- The state index names (sp = '{ns}:state:'): of a state, and of a state and job type.
local function state_names(sp, state, job_type)
  local all = sp .. state
  return all, all .. ':' .. job_type
end

-- state_names, each made once per call (a call of many jobs names the same indexes often).
local function state_index(sp, state, job_type)
  if index_names_of == nil then
    index_names_of = {}
  end
  local of_state = index_names_of[state]
  if not of_state then
    of_state = {[''] = sp .. state}
    index_names_of[state] = of_state
  end
  local typed = of_state[job_type]
  if not typed then
    typed = of_state[''] .. ':' .. job_type
    of_state[job_type] = typed
  end
  return of_state[''], typed
end

-- The state indexes of a job type in each state given: checked once.
local function check_state_indexes(sp, job_type, first, second)
  local all, typed = state_index(sp, first, job_type)
  check_type_once(all, 'zset')
  check_type_once(typed, 'zset')
  if second then
    all, typed = state_index(sp, second, job_type)
    check_type_once(all, 'zset')
    check_type_once(typed, 'zset')
  end
end

-- Moves a job between the state indexes (from or to may be nil: added, removed). created: ms,
-- a number or already its text.
local function later_move(sp, id, job_type, created, from, to)
  if from then
    local all, typed = state_index(sp, from, job_type)
    later_zrem(all, id)
    later_zrem(typed, id)
  end
  if to then
    local all, typed = state_index(sp, to, job_type)
    local score = type(created) == 'string' and created or int(created)
    later_zadd(all, score, id)
    later_zadd(typed, score, id)
  end
end

-- The key is kept at least ttl ms more (a finished set must outlive its longest member).
local function later_keep(key, ttl)
  local values = bucket('keep', key)
  values[3] = math.max(values[3] or 0, ttl)
end

-- Makes the gathered writes. Signals: one list element per job, so one blocked BLPOP per job
-- wakes; the list holds at most cap and expires signal_ttl ms after it was created, so signals
-- nobody waited for do not pile up (a waiter checks for due work before it blocks anyway).
-- A kept key's expiry only ever moves later: PEXPIRE GT, and when that declines, PTTL tells a
-- key with no expiry (which GT treats as never expiring) from one that expires later already.
local function write_later(cap, signal_ttl)
  if later_order == nil then
    return
  end
  for _, entry in ipairs(later_order) do
    local kind, key = entry[1], entry[2]
    if kind == 'zadd' then
      redis.call('ZADD', key, unpack(entry, 3))
    elseif kind == 'zrem' then
      redis.call('ZREM', key, unpack(entry, 3))
    elseif kind == 'sadd' then
      redis.call('SADD', key, unpack(entry, 3))
    elseif kind == 'signal' then
      signal_length[key] = push_signals(key, signal_length[key], entry, 3, #entry - 2, cap,
        signal_ttl)
    elseif kind == 'keep' then
      local ttl = entry[3]
      if redis.call('PEXPIRE', key, ttl, 'GT') == 0 and redis.call('PTTL', key) == -1 then
        redis.call('PEXPIRE', key, ttl)
      end
    end
  end
end

-- Moves a pending or active job (from) to 'completed', 'failed' or 'cancelled'. All checks are
-- the caller's: the record is in `from` (held, when active), `source` is the ready or leased
-- zset it is listed in, `index` is its key index when that still names it, and `errors` is the
-- new errors field when `error` is set. `c` holds what is the same for every job of the call:
-- now, retain, margin (ms), the finished zset and the state index prefix (sp). The
-- record and key index expire (real time) a margin after retention ends; until then, scripts
-- judge by expires_at on the script clock.
local function finish(c, key, id, job, state, from, source, index, error, errors)
  local now = c.now
  local expires_at = math.max(now + c.retain, job.keep_until or 0)
  local ttl = expires_at - now + c.margin
  local expires = int(expires_at)
  if error then
    redis.call('HSET', key, 'state', state, 'expires_at', expires, 'finished_at', c.now_text,
      'last_error', error, 'errors', errors)
  else
    redis.call('HSET', key, 'state', state, 'expires_at', expires, 'finished_at', c.now_text)
  end
  if from == 'active' then
    redis.call('HDEL', key, 'token', 'lease_until')
  end
  redis.call('PEXPIRE', key, ttl)
  if index then
    redis.call('PEXPIRE', index, ttl)
  end
  later_zrem(source, id)
  later_zadd(c.finished, expires, id)
  later_keep(c.finished, ttl)
  later_move(c.sp, id, job.type, created_of(job), from, state)
  local ns = namespace_of(c.sp)
  local lane = lane_of_source(ns, source)
  if lane then
    local live, done = ns .. 'lane:live:' .. lane, ns .. 'lane:' .. state .. ':' .. lane
    if zset_writable(live) and zset_writable(done) then
      later_zrem(live, id)
      later_zadd(done, int(created_of(job)), id)
    end
  end
end

-- The checks of a lane's indexes that a job of a named queue moving from live to a finished
-- state writes (finish() writes them).
local function check_lane_finish(ns, queue, job_type, state)
  if named_queue(queue) then
    check_type_once(lane_index(ns, 'live', queue, job_type), 'zset')
    check_type_once(lane_index(ns, state, queue, job_type), 'zset')
  end
end

-- Retention cleanup: up to PRUNE_BATCH jobs of a finished zset whose retention has ended (their
-- records expire on their own) leave that zset and the state indexes of their state, the one of
-- all types and the one of each type in the types set, and the lane index of that state of
-- each lane in the lanes set (the record, which would name the type and queue, may be gone). Its own checks come first: a key of another type among those leaves everything
-- as it was (the calling script's writes stand; the prune is retried by a later call).
local PRUNE_BATCH = 64

local function prune_ended(finished, state, sp, types, now)
  local ok, plan = pcall(function()
    local ended = read('zset', 'ZRANGE', finished, '-inf', now, 'BYSCORE', 'LIMIT', 0,
      PRUNE_BATCH)
    if #ended == 0 then
      return nil
    end
    local indexes = {sp .. state}
    for _, job_type in ipairs(read('set', 'SMEMBERS', types)) do
      indexes[#indexes + 1] = sp .. state .. ':' .. job_type
    end
    local lanes = namespace_of(sp) .. 'lane:' .. state .. ':'
    for _, lane in ipairs(read('set', 'SMEMBERS', types .. ':lanes')) do
      indexes[#indexes + 1] = lanes .. lane
    end
    for _, index in ipairs(indexes) do
      check_type_once(index, 'zset')
    end
    return {ended, indexes}
  end)
  if not ok or plan == nil then
    return
  end
  local ended = plan[1]
  redis.call('ZREM', finished, unpack(ended))
  for _, index in ipairs(plan[2]) do
    redis.call('ZREM', index, unpack(ended))
  end
end

-- Workflows (jobs.spi.WorkflowStore; stored by enqueue_workflow.lua). A workflow job's record
-- holds 'workflow' (the workflow's id); one with parents also 'depends_on' (their ids, JSON)
-- and 'waiting' (how many have not finished: while above 0 the job is pending but in no ready
-- zset, so no claim sees it); a parent holds 'dependents' (JSON [[child id, 1 on an
-- on_failure="continue" edge else 0], ...]) until it finishes. The workflow's hash
-- '{ns}:workflow:<id>' holds 'jobs' (their ids, JSON, in stored order), 'open' (how many are
-- pending or active), and what a settle needs to release or cancel a dependent that its call
-- does not carry: 'cap' and 'ttl' of the wake-up signals, 'error' (the parts of
-- jobs.spi.workflow_cancelled_error, JSON). It has no expiry while a job is open; when the
-- last one finishes it gets the longest remaining expiry of its jobs' records, so it goes with
-- them. A plain job's settle reads one field more ('workflow', absent) and does nothing else.
--
-- A settle script loads 'workflow' with the job and, when set, calls workflow_check in its
-- checks and workflow_apply in its writes: the dependents are released or cancelled in the
-- same script as their parent's end, transitively down the DAG (a workflow holds at most
-- redis_jobs.workflows.MAX_WORKFLOW_JOBS jobs: that bounds the walk).
local WORKFLOW_CHILD = job_fields({'workflow', 'waiting', 'dependents', 'priority',
  'created_at', 'keep_until', 'errors', 'queue'})

local function decoded(text, what)
  local ok, value = pcall(cjson.decode, text)
  if not ok or type(value) ~= 'table' then
    refuse('malformed ' .. what)
  end
  return value
end

-- The error a dependent is cancelled with (jobs.spi.workflow_cancelled_error).
local function cancelled_text(parts, id, job_type, ended)
  if parts then
    return parts[1] .. id .. parts[2] .. job_type .. parts[3] .. ended .. parts[4]
  end
  return 'WorkflowCancelled: parent job ' .. id .. ' (' .. job_type .. ') ended ' .. ended
end

-- A copy of target's fields in journal (once), for workflow_check to undo a refused plan's.
local function remember(journal, target)
  if journal[target] == nil then
    local copy = {}
    for name, value in pairs(target) do
      copy[name] = value
    end
    journal[target] = copy
  end
end

-- The checks of the end of workflow job `id` (record at key; job as loaded, with its
-- 'workflow'), which ended `ended` ('completed', 'failed', 'cancelled' or 'deleted'), having
-- been pending or active if `unfinished`: each dependent waits for one parent less (due at
-- zero: at its run_at, or now if later) or, when the parent did not complete and the edge does
-- not continue, is cancelled, and so on down the DAG. Reads every key it plans to write
-- (refuses, nothing written, on a key of another type or a malformed record); returns the plan
-- for workflow_apply. A dependent no longer pending, gone, or released already is left alone.
--
-- What the checks plan is kept for the whole call (workflow_children, workflow_open: each
-- dependent's count of parents and each workflow's count of open jobs): a later check of the
-- call (claim checks every job before it writes any) starts from it, and each apply writes it
-- as it stands (a dependent or count another plan of the call changed too is written once
-- more, with the same or a later value).
local function plan_workflow(journal, sp, key, id, job, ended, unfinished, now)
  local ns = namespace_of(sp)
  local wf = ns .. 'workflow:' .. job.workflow
  if workflow_children == nil then
    workflow_children, workflow_open = {}, {}
  end
  local open = workflow_open[wf]
  if open == nil then
    local meta = read('hash', 'HMGET', wf, 'open', 'cap', 'ttl', 'error')
    open = {count = tonumber(meta[1]), cap = tonumber(meta[2]) or 0,
      ttl = tonumber(meta[3]) or 0,
      parts = meta[4] and decoded(meta[4], 'workflow error parts in ' .. wf)}
    workflow_open[wf] = open
  end
  local plan = {ns = ns, sp = sp, wf = wf, open = open, parents = {}, children = {}}
  local seen = {}
  local finished = unfinished and 1 or 0
  local queue = {{id, job.type, ended, key, redis.call('HGET', key, 'dependents')}}
  local next_parent = 1
  while next_parent <= #queue do
    local parent = queue[next_parent]
    next_parent = next_parent + 1
    local list = parent[5]
    if list then
      plan.parents[#plan.parents + 1] = parent[4]
      for _, edge in ipairs(decoded(list, 'dependents of ' .. parent[4])) do
        local child_id = edge[1]
        local child = workflow_children[child_id]
        if child == nil then
          local child_key = ns .. 'job:' .. child_id
          local loaded = load_job(child_key, WORKFLOW_CHILD)
          child = {id = child_id, key = child_key, job = loaded,
            left = loaded and loaded.waiting or 0}
          workflow_children[child_id] = child
        end
        local child_job = child.job
        if child_job and child_job.state == 'pending' and child.left > 0 then
          remember(journal, child)
          if not seen[child_id] then
            seen[child_id] = true
            plan.children[#plan.children + 1] = child
          end
          child.dirty = true
          child.ready = lane_key(ns, 'ready', child_job.queue, child_job.type)
          check_type_once(child.ready, 'zset')
          if parent[3] == 'completed' or edge[2] == 1 then
            child.left = child.left - 1
            if child.left == 0 then
              child.signal = ns .. 'signal:' .. child_job.type
              check_signal(child.signal)
            end
          else
            child.left = 0
            child.cancel = cancelled_text(open.parts, parent[1], parent[2], parent[3])
            child.errors = with_error(child_job.errors, child_job.attempts, now, child.cancel)
            check_type_once(ns .. 'cancelled', 'zset')
            check_state_indexes(sp, child_job.type, 'pending', 'cancelled')
            check_lane_finish(ns, child_job.queue, child_job.type, 'cancelled')
            finished = finished + 1
            queue[#queue + 1] = {child_id, child_job.type, 'cancelled', child.key,
              child_job.dependents}
          end
        end
      end
    end
  end
  if open.count and finished > 0 then
    remember(journal, open)
    open.count = math.max(open.count - finished, 0)
    open.dirty = true
    if open.count == 0 and not open.jobs then
      open.jobs = decoded(redis.call('HGET', wf, 'jobs') or '[]', 'job list of ' .. wf)
    end
  end
  return plan
end

-- plan_workflow, whose changes to the call's plans are undone when it refuses (a dependent's
-- record malformed, a key of another type): the call's other plans stand as they were.
local function workflow_check(sp, key, id, job, ended, unfinished, now)
  local journal = {}
  local ok, plan = pcall(plan_workflow, journal, sp, key, id, job, ended, unfinished, now)
  if not ok then
    for target, copy in pairs(journal) do
      for name in pairs(target) do
        target[name] = nil
      end
      for name, value in pairs(copy) do
        target[name] = value
      end
    end
    error(plan, 0)
  end
  return plan
end

-- A dependent as workflow_check left it: cancelled (c: finish's call table), due, or waiting.
local function write_dependent(plan, child, now, c)
  local job = child.job
  if child.cancel then
    redis.call('HSET', child.key, 'waiting', '0')
    finish(c, child.key, child.id, job, 'cancelled', 'pending', child.ready, nil, child.cancel,
      child.errors)
  elseif child.left == 0 then
    local run_at = math.max(job.run_at, now)
    redis.call('HSET', child.key, 'waiting', '0', 'run_at', int(run_at))
    later_zadd(child.ready, ready_score(run_at, job.priority), child.id)
    signal_length[child.signal] = push_signals(child.signal, signal_length[child.signal],
      ONE_SIGNAL, 1, 1, plan.open.cap, plan.open.ttl)
  else
    redis.call('HSET', child.key, 'waiting', int(child.left))
  end
  child.dirty = false
end

-- The writes of a workflow_check plan, after the settle's own (the settled record's expiry is
-- set). retain: the retention of a cancelled job (the failed one's); margin: expiry margin.
local function workflow_apply(plan, now, retain, margin)
  for _, parent in ipairs(plan.parents) do
    redis.call('HDEL', parent, 'dependents')
  end
  local c = {now = now, now_text = int(now), retain = retain, margin = margin,
    finished = plan.ns .. 'cancelled', sp = plan.sp}
  local cancelled = false
  for _, child in ipairs(plan.children) do
    if child.dirty then  -- else an earlier plan of the call wrote it as it stands
      write_dependent(plan, child, now, c)
      cancelled = cancelled or child.cancel ~= nil
    end
  end
  if cancelled then  -- as cancel.lua does: cancelled jobs past retention leave the indexes
    prune_ended(c.finished, 'cancelled', plan.sp, plan.ns .. 'types', now)
  end
  local open = plan.open
  if not open.dirty then
    return
  end
  redis.call('HSET', plan.wf, 'open', int(open.count))
  if open.count > 0 then
    open.dirty = false
    return
  end
  -- every job has finished: the workflow's key goes with the longest kept of their records
  local longest = -2
  for _, member in ipairs(open.jobs) do
    local ttl = redis.call('PTTL', plan.ns .. 'job:' .. member)
    if ttl == -1 then
      return  -- a record without an end yet: a later plan of the call finishes it
    end
    longest = math.max(longest, ttl)
  end
  open.dirty = false
  if longest < 0 then
    redis.call('DEL', plan.wf)
  else
    redis.call('PEXPIRE', plan.wf, longest)
  end
end

-- A record deleted by the call (purge): a later check of the call reads it anew (gone), so no
-- dependent's plan made before is written onto its key again.
local function workflow_forget(id)
  if workflow_children ~= nil then
    workflow_children[id] = nil
  end
end

-- A finished workflow job is pending again (requeue): its workflow counts it open, and keeps
-- its key without an expiry. Its dependents were released or cancelled when it ended: a
-- parent still to end does not count it (waiting 0). The check reads the workflow's key.
local function workflow_reopen_check(sp, job)
  local wf = namespace_of(sp) .. 'workflow:' .. job.workflow
  local open = read('hash', 'HGET', wf, 'open')
  return {wf = wf, open = tonumber(open)}
end

local function workflow_reopen(plan, key)
  redis.call('HSET', key, 'waiting', '0')
  if plan.open then
    redis.call('HSET', plan.wf, 'open', int(plan.open + 1))
    redis.call('PERSIST', plan.wf)
  end
end

-- The start of every call: its KEYS and ARGV, and a fresh per-call state for the helpers above
-- (the library lives on between calls; no check or write may leak from one call to the next).
local function begin(keys, args)
  KEYS, ARGV = keys, args
  checked, field_names, later_order, later_of, signal_length, index_names_of = nil
  workflow_children, workflow_open = nil
end
