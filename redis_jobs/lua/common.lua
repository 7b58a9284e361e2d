-- common.lua: helpers that redis_jobs.scripts puts in front of every script of this package.
-- Like the scripts, this text is fixed: no script source is ever built from input; names, ids,
-- types and payloads reach the scripts only through KEYS and ARGV.
--
-- Every script checks first and writes last. Redis does not roll back a script that fails
-- part-way, so each one reads and validates every key it will touch (type, record fields)
-- before its first write; refuse() raises a "JOBSCRIPT ..." error, which the driver raises as
-- RedisScriptError, and nothing has been written by then. Scripts that take a batch of jobs
-- (for_each_job) check and write one job at a time: a job whose check refuses gets the
-- refusal as its result, nothing of it is written, and the other jobs go on.
--
-- TIME is read before writes: fine on Redis >= 7, where scripts are always replicated by their
-- effects (lua-replicate-commands is gone), so replicas receive the values written, not TIME.

local CORE = {'type', 'state', 'attempts', 'max_attempts', 'run_at'}
local NUMERIC = {
  attempts = true, max_attempts = true, run_at = true, lease_until = true,
  expires_at = true, keep_until = true, timeout_ms = true, created_at = true, finished_at = true,
}
local STATES = {pending = true, active = true, completed = true, failed = true, cancelled = true}
local MAX_ERRORS = 20

local REFUSAL = 'JOBSCRIPT '

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
-- check(keys, args) reads only and returns (result) or (nil, plan); apply(plan) writes and
-- returns the result. Returns one result per job; a refused job's result is its refusal text.
local function for_each_job(shared_keys, keys_per_job, shared_args, args_per_job, check, apply)
  local results = {}
  local count = (#ARGV - shared_args) / args_per_job
  for job = 0, count - 1 do
    local keys, args = {}, {}
    for k = 1, keys_per_job do
      keys[k] = KEYS[shared_keys + job * keys_per_job + k]
    end
    for a = 1, args_per_job do
      args[a] = ARGV[shared_args + job * args_per_job + a]
    end
    local ok, result, plan = pcall(check, keys, args)
    if not ok then
      results[job + 1] = refusal(result)
    elseif plan ~= nil then
      results[job + 1] = apply(plan)
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

-- True when the key exists with the wanted type, false when it does not exist; refuses otherwise.
local function check_type(key, wanted)
  local kind = redis.call('TYPE', key)['ok']
  if kind == 'none' then
    return false
  end
  if kind ~= wanted then
    refuse('key ' .. key .. ' holds a ' .. kind .. ', expected a ' .. wanted)
  end
  return true
end

-- The record at key as a table (nil when absent): the CORE fields, which must be present and
-- valid, plus the optional fields asked for (false when missing). Numeric fields are numbers.
-- One HMGET does the type check too: on a key of another type it fails, and is refused.
local function load_job(key, optional)
  local names = {unpack(CORE)}
  for _, name in ipairs(optional) do
    names[#names + 1] = name
  end
  local values = redis.pcall('HMGET', key, unpack(names))
  if values['err'] then
    refuse('key ' .. key .. ' is not a job record: ' .. values['err'])
  end
  local job, found = {}, false
  for index, name in ipairs(names) do
    local value = values[index]
    if value and NUMERIC[name] then
      value = tonumber(value)
      if value == nil then
        refuse('job record ' .. key .. ' has a non-numeric ' .. name .. ' field')
      end
    end
    job[name] = value
    found = found or value ~= false
  end
  if not found and redis.call('EXISTS', key) == 0 then
    return nil
  end
  for _, name in ipairs(CORE) do
    if not job[name] then
      refuse('job record ' .. key .. ' has no ' .. name .. ' field')
    end
  end
  if not STATES[job.state] then
    refuse('job record ' .. key .. ' has an unknown state')
  end
  return job
end

-- The job at `key` if `token` holds its lease (it is active under that token), else nil.
-- Loads the token and whatever `optional` fields the caller needs.
local function held_job(key, token, optional)
  local fields = {'token'}
  for _, name in ipairs(optional or {}) do
    fields[#fields + 1] = name
  end
  local job = load_job(key, fields)
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
  if not check_type(index_key, 'string') then
    return false
  end
  return redis.call('GET', index_key) == id
end

-- check_type for keys whose existence does not matter (sets, lists, the counts hash): each key
-- is checked once per script run. Scripts only ever write a key with the type checked here.
local checked = {}
local function check_type_once(key, wanted)
  if checked[key] ~= wanted then
    check_type(key, wanted)
    checked[key] = wanted
  end
end

-- Writes to sorted sets, the counts hash, signal lists and TTLs of finished sets, gathered
-- while a script runs and made in one go at its end: fewer calls. No check reads these keys,
-- so deferring them changes no outcome, and every one was type-checked before it was queued.
local later = {order = {}, buckets = {}}

local function bucket(kind, key)
  local id = kind .. '\0' .. key
  local found = later.buckets[id]
  if not found then
    found = {}
    later.buckets[id] = found
    later.order[#later.order + 1] = {kind, key, found}
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

local function later_count(key, field, by)
  local values = bucket('count', key)
  values[field] = (values[field] or 0) + by
end

-- A wake-up signal for idle runners of a type (see write_later).
local function later_signal(key)
  local values = bucket('signal', key)
  values[#values + 1] = '1'
end

-- The key is kept at least ttl ms more (a finished set must outlive its longest member).
local function later_sadd(key, member)
  local values = bucket('sadd', key)
  values[#values + 1] = member
end

-- The state indexes (sp = '{ns}:state:') of a job type in each state given: checked once.
local function check_state_indexes(sp, job_type, ...)
  for _, state in ipairs({...}) do
    check_type_once(sp .. state, 'zset')
    check_type_once(sp .. state .. ':' .. job_type, 'zset')
  end
end

-- Moves a job between the state indexes (from or to may be nil: added, removed).
local function later_move(sp, id, job_type, created, from, to)
  if from then
    later_zrem(sp .. from, id)
    later_zrem(sp .. from .. ':' .. job_type, id)
  end
  if to then
    later_zadd(sp .. to, int(created), id)
    later_zadd(sp .. to .. ':' .. job_type, int(created), id)
  end
end

local function later_keep(key, ttl)
  local values = bucket('keep', key)
  values[1] = math.max(values[1] or 0, ttl)
end

-- Makes the gathered writes. Signals: one list element per job, so one blocked BLPOP per job
-- wakes; the list holds at most cap and expires signal_ttl ms after it was created, so signals
-- nobody waited for do not pile up (a waiter checks for due work before it blocks anyway).
local function write_later(cap, signal_ttl)
  for _, entry in ipairs(later.order) do
    local kind, key, values = entry[1], entry[2], entry[3]
    if kind == 'zadd' then
      redis.call('ZADD', key, unpack(values))
    elseif kind == 'zrem' then
      redis.call('ZREM', key, unpack(values))
    elseif kind == 'sadd' then
      redis.call('SADD', key, unpack(values))
    elseif kind == 'count' then
      for _, field in ipairs({'pending', 'active'}) do
        if values[field] and values[field] ~= 0 then
          redis.call('HINCRBY', key, field, values[field])
        end
      end
    elseif kind == 'signal' then
      local length = redis.call('LLEN', key)
      local pushes = math.min(#values, cap - length)
      if pushes > 0 then
        redis.call('LPUSH', key, unpack(values, 1, pushes))
        if length == 0 then
          redis.call('PEXPIRE', key, signal_ttl)
        end
      end
    elseif kind == 'keep' then
      if redis.call('PTTL', key) < values[1] then
        redis.call('PEXPIRE', key, values[1])
      end
    end
  end
end

-- Moves a pending or active job (f.from) to 'completed', 'failed' or 'cancelled'. All checks
-- are the caller's: the record is in f.from (held, when active), f.source is the ready or leased
-- zset it is listed in, index_held says whether its key index still names it, and f.errors is
-- the new errors field when f.error is set. The record and key index expire (real time) a margin
-- after retention ends; until then, scripts judge by expires_at on the script clock.
local function finish(f)
  local expires_at = math.max(f.now + f.retain, f.job.keep_until or 0)
  local ttl = expires_at - f.now + f.margin
  if f.error then
    redis.call('HSET', f.key, 'state', f.state, 'expires_at', int(expires_at),
      'finished_at', int(f.now), 'last_error', f.error, 'errors', f.errors)
  else
    redis.call('HSET', f.key, 'state', f.state, 'expires_at', int(expires_at),
      'finished_at', int(f.now))
  end
  if f.from == 'active' then
    redis.call('HDEL', f.key, 'token', 'lease_until')
  end
  redis.call('PEXPIRE', f.key, ttl)
  if f.index_held then
    redis.call('PEXPIRE', f.index, ttl)
  end
  later_zrem(f.source, f.id)
  later_zadd(f.finished, int(expires_at), f.id)
  later_keep(f.finished, ttl)
  later_count(f.counts, f.from, -1)
  later_move(f.sp, f.id, f.job.type, created_of(f.job), f.from, f.state)
end
