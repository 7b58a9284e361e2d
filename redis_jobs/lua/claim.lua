-- claim.lua: lease up to ARGV[3] due jobs of the given types, earliest due first.
--
-- KEYS[1]  job record prefix, '{ns}:job:'    KEYS[3]  failed zset
-- KEYS[2]  idempotency-key prefix, '{ns}:key:'  KEYS[4]  state index prefix, '{ns}:state:'
-- KEYS[3 + 2i]  ready zset of type i (i = 1..n)    KEYS[4 + 2i]  leased zset of type i
--
-- ARGV[1]  now ms, or '' for the server's TIME      ARGV[5]  failed retention ms
-- ARGV[2]  lease ms                                 ARGV[6]  expiry margin ms
-- ARGV[3]  limit                                    ARGV[7]  lease-expired error text
-- ARGV[4]  random part of the lease tokens          ARGV[7 + i]  type i, in KEYS order
--
-- Due: pending with run_at <= now (ready zset), or active with lease expiry <= now (leased
-- zset; such a job is due at its expiry). Each claimed job's attempts go up by one and it gets
-- a new token '<attempt>:<random>.<n>:<type>'; an expired one with no attempts left is failed
-- with the lease-expired error instead (and does not count towards the limit). Records are
-- reached through KEYS[1] .. id and key indexes through KEYS[2] .. key: the same hash tag,
-- so the same Cluster slot. A set member whose record is gone (deleted by hand, evicted) is
-- dropped from it and from the state indexes, and no longer counted. The lease expiry is the
-- leased zset's score (the record does not repeat it).
--
-- Returns a JSON array (one bulk string parses much faster than a nested reply) with one
-- array per claimed job: id, type, payload, attempt, max_attempts, token, timeout_ms, key,
-- trace_context (those three false when unset), reclaimed (its lease had expired), run_at.

local FIELDS = job_fields({'payload', 'timeout_ms', 'key', 'trace_context', 'created_at'})
-- What finish() reads of the call (see common.lua): every field set by each call that fails
-- a job.
local call = {}

-- Candidates {id, due, source, record key, job, errors, index} (the last four filled by the
-- checks; false until then, so that the table is made at its size), earliest due first.
local function earlier(a, b)
  if a[2] ~= b[2] then
    return a[2] < b[2]
  end
  return a[1] < b[1]
end

-- per call
local now = now_ms(ARGV[1])
local lease_ms, limit = tonumber(ARGV[2]), tonumber(ARGV[3])
local prefix, index_prefix, failed, sp = KEYS[1], KEYS[2], KEYS[3], KEYS[4]

check_type_once(failed, 'zset')

-- Each due set read is that set's type check.
local sources, candidates = {}, {}
for i = 1, #ARGV - 7 do
  local job_type, ready, leased = ARGV[7 + i], KEYS[3 + 2 * i], KEYS[4 + 2 * i]
  for from = 3 + 2 * i, 4 + 2 * i do
    local key = KEYS[from]
    local due = read('zset', 'ZRANGE', key, '-inf', now, 'BYSCORE', 'LIMIT', 0, limit,
      'WITHSCORES')
    if #due > 0 then
      local source = {
        key = key, state = key == ready and 'pending' or 'active', type = job_type,
        ready = ready, leased = leased,
      }
      sources[#sources + 1] = source
      for j = 1, #due, 2 do
        candidates[#candidates + 1] = {due[j], tonumber(due[j + 1]), source, false, false,
          false, false}
      end
    end
  end
end
if #sources > 1 then
  table.sort(candidates, earlier)
end

-- Checks: read every record to be touched before the first write.
local take, expire, orphans = {}, {}, {}
for _, c in ipairs(candidates) do
  if #take >= limit then
    break
  end
  local id, source = c[1], c[3]
  local key = prefix .. id
  local job = load_job(key, FIELDS)
  c[4], c[5] = key, job
  if job == nil then
    check_state_indexes(sp, source.type, source.state)
    orphans[#orphans + 1] = c
  elseif not job.payload then
    refuse('job record ' .. key .. ' has no payload field')
  elseif job.type ~= source.type or job.state ~= source.state then
    refuse('job record ' .. key .. ' is ' .. job.state .. ' but listed in ' .. source.key)
  elseif source.state == 'active' and job.attempts >= job.max_attempts then
    local more = redis.call('HMGET', key, 'keep_until', 'errors')
    job.keep_until = more[1] and number_field(key, 'keep_until', more[1])
    check_state_indexes(sp, source.type, 'active', 'failed')
    c[6] = with_error(more[2], job.attempts, now, ARGV[7])
    if job.key then
      local index = index_prefix .. job.key
      if index_names(index, id) then
        c[7] = index
      end
    end
    expire[#expire + 1] = c
  else
    if source.state == 'pending' then
      check_state_indexes(sp, source.type, 'pending', 'active')
    end
    take[#take + 1] = c
  end
end

-- Writes.
for _, c in ipairs(orphans) do
  local source = c[3]
  later_zrem(source.key, c[1])
  later_move(sp, c[1], source.type, 0, source.state, nil)
end
if #expire > 0 then
  call.now, call.now_text = now, int(now)
  call.retain, call.margin = tonumber(ARGV[5]), tonumber(ARGV[6])
  call.finished, call.sp = failed, sp
  for _, c in ipairs(expire) do
    finish(call, c[4], c[1], c[5], 'failed', 'active', c[3].leased, c[7], ARGV[7], c[6])
  end
end
local reply = {}
local lease_until = int(now + lease_ms)
local token_middle = ':' .. ARGV[4] .. '.'
for n, c in ipairs(take) do
  local id, source, key, job = c[1], c[3], c[4], c[5]
  local attempt = job.attempts + 1
  local token = attempt .. token_middle .. n .. ':' .. source.type
  redis.call('HSET', key, 'state', 'active', 'attempts', attempt, 'token', token)
  if source.state == 'pending' then
    later_zrem(source.ready, id)
    later_move(sp, id, source.type, created_of(job), 'pending', 'active')
  end
  later_zadd(source.leased, lease_until, id)
  reply[n] = {id, source.type, job.payload, attempt, job.max_attempts, token,
    job.timeout_ms, job.key, job.trace_context, source.state == 'active', job.run_at}
end
write_later(0, 0)
if #reply == 0 then
  return '[]'
end
return cjson.encode(reply)
