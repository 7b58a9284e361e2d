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
-- then 11 per job:  id, type, payload (JSON text), max attempts, delay ms,
--                   run_at ms or '' (now + delay), timeout ms or '', keep_until ms or '',
--                   flags ('k' has a key, 't' has a trace context), key, trace context
--
-- Returns per job: 1 stored (or already stored with the same id, type and payload, as when a
-- client retries a call whose reply was lost), 0 a live job holds the key, -1 the id is taken
-- by a different live job. A key holder or id holder whose retention has ended is deleted.

local now = now_ms(ARGV[1])
local now_text = int(now)
local prefix, completed, failed, cancelled = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local sp, types = KEYS[5], KEYS[6]
local cap, signal_ttl = tonumber(ARGV[2]), tonumber(ARGV[3])
local EXISTING = {'payload', 'expires_at', 'created_at'}
local HOLDER = {'expires_at', 'created_at'}
local known_types = {}

local function check(keys, args)
  local record, ready, signal_key, index = keys[1], keys[2], keys[3], keys[4]
  local id, job_type, flags = args[1], args[2], args[9]
  local has_key = string.find(flags, 'k', 1, true) ~= nil
  if known_types[job_type] == nil then
    known_types[job_type] = read('set', 'SISMEMBER', types, job_type) == 1
  end
  check_type_once(ready, 'zset')
  check_signal(signal_key)
  check_state_indexes(sp, job_type, 'pending')
  local stale = nil
  local existing = check_type(record, 'hash') > 0 and load_job(record, EXISTING)
  if existing then
    if is_alive(existing, record, now) then
      if existing.type == job_type and existing.payload == args[3] then
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
    end
  end
  local run_at = now + tonumber(args[5])
  if args[6] ~= '' then
    run_at = tonumber(args[6])
  end
  return nil, {keys, args, stale, run_at == now and now_text or int(run_at), has_key}
end

local function apply(plan)
  local keys, args, stale, run_at, has_key = plan[1], plan[2], plan[3], plan[4], plan[5]
  local id, job_type = args[1], args[2]
  if stale then
    for _, entry in ipairs(stale) do
      redis.call('DEL', prefix .. entry.id)
      later_zrem(completed, entry.id)
      later_zrem(failed, entry.id)
      later_zrem(cancelled, entry.id)
      later_move(sp, entry.id, entry.job.type, 0, entry.job.state, nil)
    end
  end
  local fields = {'type', job_type, 'payload', args[3], 'state', 'pending', 'attempts', '0',
    'max_attempts', args[4], 'run_at', run_at, 'created_at', now_text}
  if args[7] ~= '' then
    fields[#fields + 1] = 'timeout_ms'
    fields[#fields + 1] = args[7]
  end
  if args[8] ~= '' then
    fields[#fields + 1] = 'keep_until'
    fields[#fields + 1] = args[8]
  end
  if has_key then
    fields[#fields + 1] = 'key'
    fields[#fields + 1] = args[10]
    redis.call('SET', keys[4], id)
  end
  if string.find(args[9], 't', 1, true) then
    fields[#fields + 1] = 'trace_context'
    fields[#fields + 1] = args[11]
  end
  redis.call('HSET', keys[1], unpack(fields))
  later_zadd(keys[2], run_at, id)
  later_move(sp, id, job_type, now_text, nil, 'pending')
  if not known_types[job_type] then
    later_sadd(types, job_type)
    known_types[job_type] = true
  end
  later_signal(keys[3])
  return 1
end

local results = for_each_job(6, 4, 3, 11, check, apply)
write_later(cap, signal_ttl)
return results
