-- claim.lua: lease up to ARGV[3] due jobs of the given types, earliest due first.
--
-- KEYS[1]  job record prefix, '{ns}:job:'    KEYS[3]  counts hash
-- KEYS[2]  idempotency-key prefix, '{ns}:key:'  KEYS[4]  failed zset
-- KEYS[5]  state index prefix, '{ns}:state:'
-- KEYS[4 + 2i]  ready zset of type i (i = 1..n)    KEYS[5 + 2i]  leased zset of type i
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
-- dropped and no longer counted.
--
-- Returns a JSON array (one bulk string parses much faster than a nested reply) with one
-- array per claimed job: id, type, payload, attempt, max_attempts, token, timeout_ms, key,
-- trace_context (those three false when unset), reclaimed (its lease had expired), run_at.

local now = now_ms(ARGV[1])
local lease_ms, limit = tonumber(ARGV[2]), tonumber(ARGV[3])
local prefix, index_prefix, counts, failed, sp = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]

check_type_once(counts, 'hash')
check_type_once(failed, 'zset')

local candidates = {}
for i = 1, #ARGV - 7 do
  local job_type, ready, leased = ARGV[7 + i], KEYS[4 + 2 * i], KEYS[5 + 2 * i]
  for _, source in ipairs({{ready, 'pending'}, {leased, 'active'}}) do
    check_type_once(source[1], 'zset')
    local due = redis.call('ZRANGE', source[1], '-inf', now, 'BYSCORE', 'LIMIT', 0, limit,
      'WITHSCORES')
    for j = 1, #due, 2 do
      candidates[#candidates + 1] = {
        id = due[j], due = tonumber(due[j + 1]), state = source[2], type = job_type,
        ready = ready, leased = leased, from = source[1],
      }
    end
  end
end
table.sort(candidates, function(a, b)
  if a.due ~= b.due then
    return a.due < b.due
  end
  return a.id < b.id
end)

-- Checks: read every record to be touched before the first write.
local take, expire, orphans = {}, {}, {}
for _, c in ipairs(candidates) do
  if #take >= limit then
    break
  end
  c.key = prefix .. c.id
  c.job = load_job(c.key, {'payload', 'timeout_ms', 'key', 'trace_context', 'keep_until',
    'created_at', 'errors'})
  if c.job == nil then
    orphans[#orphans + 1] = c
  elseif not c.job.payload then
    refuse('job record ' .. c.key .. ' has no payload field')
  elseif c.job.type ~= c.type or c.job.state ~= c.state then
    refuse('job record ' .. c.key .. ' is ' .. c.job.state .. ' but listed in ' .. c.from)
  elseif c.state == 'active' and c.job.attempts >= c.job.max_attempts then
    check_state_indexes(sp, c.type, 'active', 'failed')
    c.errors = with_error(c.job.errors, c.job.attempts, now, ARGV[7])
    if c.job.key then
      c.index = index_prefix .. c.job.key
      c.index_held = index_names(c.index, c.id)
    end
    expire[#expire + 1] = c
  else
    if c.state == 'pending' then
      check_state_indexes(sp, c.type, 'pending', 'active')
    end
    take[#take + 1] = c
  end
end

-- Writes.
for _, c in ipairs(orphans) do
  later_zrem(c.from, c.id)
  later_count(counts, c.state, -1)
end
for _, c in ipairs(expire) do
  finish({
    key = c.key, id = c.id, job = c.job, state = 'failed', error = ARGV[7], now = now,
    retain = tonumber(ARGV[5]), margin = tonumber(ARGV[6]), source = c.leased, from = 'active',
    finished = failed, counts = counts, index = c.index, index_held = c.index_held,
    errors = c.errors, sp = sp,
  })
end
local reply = {}
local lease_until = int(now + lease_ms)
for n, c in ipairs(take) do
  local attempt = c.job.attempts + 1
  local token = int(attempt) .. ':' .. ARGV[4] .. '.' .. n .. ':' .. c.type
  redis.call('HSET', c.key, 'state', 'active', 'attempts', int(attempt), 'token', token,
    'lease_until', lease_until)
  if c.state == 'pending' then
    later_zrem(c.ready, c.id)
    later_count(counts, 'pending', -1)
    later_count(counts, 'active', 1)
    later_move(sp, c.id, c.type, created_of(c.job), 'pending', 'active')
  end
  later_zadd(c.leased, lease_until, c.id)
  local job = c.job
  reply[n] = {c.id, c.type, job.payload, attempt, job.max_attempts, token,
    job.timeout_ms, job.key, job.trace_context, c.state == 'active', job.run_at}
end
write_later(0, 0)
if #reply == 0 then
  return '[]'
end
return cjson.encode(reply)
