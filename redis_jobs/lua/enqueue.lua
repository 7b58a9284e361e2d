-- enqueue.lua: store one or more pending jobs, each unless a live job holds its idempotency key.
--
-- KEYS[1]  counts hash      KEYS[2]  job record prefix, '{ns}:job:'
-- KEYS[3]  completed zset   KEYS[4]  failed zset      KEYS[5]  cancelled zset
-- KEYS[6]  state index prefix, '{ns}:state:'          KEYS[7]  job types set
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
local counts, prefix, completed, failed = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local cancelled, sp, types = KEYS[5], KEYS[6], KEYS[7]
local cap, signal_ttl = tonumber(ARGV[2]), tonumber(ARGV[3])

check_type_once(counts, 'hash')
check_type_once(types, 'set')

local function check(keys, args)
  local record, ready, signal_key, index = keys[1], keys[2], keys[3], keys[4]
  local id, flags = args[1], args[9]
  local has_key = string.find(flags, 'k', 1, true) ~= nil
  check_type_once(ready, 'zset')
  check_type_once(signal_key, 'list')
  check_state_indexes(sp, args[2], 'pending')
  local stale = {}
  local existing = redis.call('EXISTS', record) == 1
    and load_job(record, {'payload', 'expires_at', 'created_at'})
  if existing then
    if is_alive(existing, record, now) then
      if existing.type == args[2] and existing.payload == args[3] then
        return 1
      end
      return -1
    end
    stale[#stale + 1] = {id = id, job = existing}
  end
  if has_key and check_type(index, 'string') then
    local holder = redis.call('GET', index)
    if holder ~= id then
      local holder_key = prefix .. holder
      local held = load_job(holder_key, {'expires_at', 'created_at'})
      if held then
        if is_alive(held, holder_key, now) then
          return 0
        end
        stale[#stale + 1] = {id = holder, job = held}
      end
    end
  end
  for _, entry in ipairs(stale) do
    check_type_once(completed, 'zset')
    check_type_once(failed, 'zset')
    check_type_once(cancelled, 'zset')
    check_state_indexes(sp, entry.job.type, entry.job.state)
  end
  local run_at = now + tonumber(args[5])
  if args[6] ~= '' then
    run_at = tonumber(args[6])
  end
  return nil, {
    keys = keys, args = args, stale = stale, run_at = int(run_at), has_key = has_key,
    has_trace = string.find(flags, 't', 1, true) ~= nil,
  }
end

local function apply(plan)
  local record, ready, signal_key, index = unpack(plan.keys)
  local args = plan.args
  for _, entry in ipairs(plan.stale) do
    redis.call('DEL', prefix .. entry.id)
    later_zrem(completed, entry.id)
    later_zrem(failed, entry.id)
    later_zrem(cancelled, entry.id)
    later_move(sp, entry.id, entry.job.type, 0, entry.job.state, nil)
  end
  redis.call('HSET', record, 'type', args[2], 'payload', args[3], 'state', 'pending',
    'attempts', '0', 'max_attempts', args[4], 'run_at', plan.run_at, 'created_at', int(now))
  local optional = {}
  if args[7] ~= '' then
    optional[#optional + 1] = 'timeout_ms'
    optional[#optional + 1] = args[7]
  end
  if args[8] ~= '' then
    optional[#optional + 1] = 'keep_until'
    optional[#optional + 1] = args[8]
  end
  if plan.has_key then
    optional[#optional + 1] = 'key'
    optional[#optional + 1] = args[10]
  end
  if plan.has_trace then
    optional[#optional + 1] = 'trace_context'
    optional[#optional + 1] = args[11]
  end
  if #optional > 0 then
    redis.call('HSET', record, unpack(optional))
  end
  if plan.has_key then
    redis.call('SET', index, args[1])
  end
  later_zadd(ready, plan.run_at, args[1])
  later_move(sp, args[1], args[2], now, nil, 'pending')
  later_sadd(types, args[2])
  later_count(counts, 'pending', 1)
  later_signal(signal_key)
  return 1
end

local results = for_each_job(7, 4, 3, 11, check, apply)
write_later(cap, signal_ttl)
return results
