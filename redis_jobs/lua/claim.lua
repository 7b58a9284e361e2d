-- claim.lua: lease up to ARGV[3] due jobs of the given types, earliest due first.
--
-- KEYS[1]  job record prefix, '{ns}:job:'    KEYS[3]  failed zset
-- KEYS[2]  idempotency-key prefix, '{ns}:key:'  KEYS[4]  state index prefix, '{ns}:state:'
-- KEYS[3 + 2i]  ready zset of type i (i = 1..n)    KEYS[4 + 2i]  leased zset of type i
--
-- ARGV[1]  now ms, or '' for the server's TIME      ARGV[5]  failed retention ms
-- ARGV[2]  lease ms                                 ARGV[6]  expiry margin ms
-- ARGV[3]  limit                                    ARGV[7..9]  the stalled error's head,
-- ARGV[4]  random part of the lease tokens              middle and tail (stalled_error_parts)
-- ARGV[10] max_stalls of a record without one       ARGV[11] m, the fleet limit keys (0: none)
-- ARGV[11 + i]  type i (i = 1..n), in KEYS order
--
-- Fleet limits (jobs.spi.limits; m > 0, only when the runner passes ClaimLimits that apply):
-- limit key j (j = 1..m) has KEYS[4 + 2n + 2j - 1], its held hash, and KEYS[4 + 2n + 2j], its
-- starts zset, and ARGV[11 + n + 4j - 3 .. 11 + n + 4j]: the type index it limits ('' for the
-- queue's key, which limits every type), concurrency ('' none), rate ('' none), per ms.
-- Counting, choosing and recording happen here, in the claim's own atomic step (see
-- limit_room and record_claims below); a type a full limit holds back is not read at all, and
-- a type at its cap has its further candidates skipped untouched (no attempt, no stall, its
-- place kept). The settle scripts know nothing of limits: a holder is counted only while its
-- lease is live, checked lazily here.
--
-- Due: pending with run_at <= now (ready zset), or active with lease expiry <= now (leased
-- zset; such a job is due at its expiry). Among due jobs the highest priority goes first
-- (the ready zsets' scores fold it in: ready_score, in common.lua), then the earliest due; an
-- expired lease ranks as priority 0 at its expiry. A pending job's attempt is counted (attempts + 1).
-- An expired lease is a stall: stalls + 1, attempts kept (the new delivery runs the attempt
-- that stalled again); one whose stalls then exceed max_stalls is failed with the stalled
-- error instead (and does not count towards the limit). Each leased job gets a new token
-- '<attempt>:<random>.<n>:<type>'. Records are reached through KEYS[1] .. id and key indexes
-- through KEYS[2] .. key: the same hash tag, so the same Cluster slot. A set member whose
-- record is gone (deleted by hand, evicted), or is not a hash, is dropped from it and from the
-- state indexes, and no longer counted. The lease expiry is the leased zset's score (the
-- record does not repeat it).
--
-- A malformed record (a field missing, not a number, not a whole number in range, NaN; a
-- state or type other than its set's) fails alone: the claim fails it with the error
-- 'malformed job record: ...' naming the field, rewrites the fields it could not read to
-- plain values (so listing and reading it work again; the error keeps what was there), and
-- leases its batch-mates. Every check of a candidate runs before the first write, so one bad
-- record never leaves a half-written batch (cjson.encode of a NaN used to fail the script
-- after it leased every job beside it).
--
-- Returns a JSON array (one bulk string parses much faster than a nested reply) with one
-- array per claimed job: id, type, payload, attempt, max_attempts, token, timeout_ms, key,
-- trace_context (those three false when unset), reclaimed (its lease had expired), run_at,
-- stalls, depends_on (a workflow job's parents as JSON text, else false). With limits (m > 0):
-- [jobs, held, retry_ms]: held the indexes of the types a full limit held back, retry_ms when
-- the soonest full limit admits again, -1 for none known (see jobs.spi.limits.plan_claim).
--
-- A stalled or malformed job failed here that belongs to a workflow releases or cancels its
-- dependents in this call too (see the workflow helpers in common.lua); if a dependent's record is malformed
-- (the check refuses), the job fails all the same and its workflow is left as it was.

local FIELDS = job_fields({'payload', 'timeout_ms', 'key', 'trace_context', 'created_at',
  'stalls', 'max_stalls', 'depends_on'})
local NUMBERS = {'attempts', 'max_attempts', 'run_at', 'timeout_ms', 'created_at', 'stalls',
  'max_stalls', 'keep_until', 'expires_at', 'finished_at'}
-- The plain value a malformed required field is rewritten to (optional ones are deleted).
local REQUIRED = {attempts = true, max_attempts = true, run_at = true}
-- cjson writes numbers with 14 significant digits: every whole number below this is exact.
local SAFE = 1e14
-- What finish() reads of the call (see common.lua): every field set by each call that fails
-- a job.
local call = {}
-- The call's state index prefix (set by each call's body).
local sp_of_call

-- Candidates {id, due, source, record key, job, errors, index, workflow plan} (the last five
-- filled by the checks; false until then, so that the table is made at its size), earliest
-- due first.
local function earlier(a, b)
  if a[2] ~= b[2] then
    return a[2] < b[2]
  end
  return a[1] < b[1]
end

-- A whole number from low up to SAFE, or a refusal naming the field.
local function whole(key, name, value, low)
  if value ~= value or value < low or value >= SAFE or value ~= math.floor(value) then
    refuse('job record ' .. key .. ' has ' .. name .. ' ' .. tostring(value)
      .. ', not a whole number from ' .. low)
  end
end

-- The checks of a candidate's record (refusals are raised): its job, or nil when gone.
local function check_record(key, source)
  local job = load_job(key, FIELDS)
  if job == nil then
    return nil
  end
  if not job.payload then
    refuse('job record ' .. key .. ' has no payload field')
  end
  if job.type ~= source.type or job.state ~= source.state then
    refuse('job record ' .. key .. ' is a ' .. job.state .. ' ' .. job.type
      .. ' job but listed in ' .. source.key)
  end
  -- x % 1 == 0 is false for NaN and the infinities: no call on the common path
  local a, m, r, t = job.attempts, job.max_attempts, job.run_at, job.timeout_ms
  local c, s, ms = job.created_at, job.stalls, job.max_stalls
  if a % 1 == 0 and a >= 0 and a < SAFE and m % 1 == 0 and m >= 1 and m < SAFE
      and r % 1 == 0 and r >= 0 and r < SAFE
      and (not t or (t % 1 == 0 and t >= 1 and t < SAFE))
      and (not c or (c % 1 == 0 and c >= 0 and c < SAFE))
      and (not s or (s % 1 == 0 and s >= 0 and s < SAFE))
      and (not ms or (ms % 1 == 0 and ms >= 0 and ms < SAFE)) then
    return job
  end
  whole(key, 'attempts', a, 0)
  whole(key, 'max_attempts', m, 1)
  whole(key, 'run_at', r, 0)
  if t then whole(key, 'timeout_ms', t, 1) end
  if c then whole(key, 'created_at', c, 0) end
  if s then whole(key, 'stalls', s, 0) end
  if ms then whole(key, 'max_stalls', ms, 0) end
  return job
end

-- The plan to fail a malformed record (c[4] its key): what to rewrite, which indexes it is
-- in; checked here, written by quarantine(). nil when the key is not a hash (an orphan).
local function quarantine_plan(c, why, now)
  local key, source = c[4], c[3]
  if redis.call('TYPE', key)['ok'] ~= 'hash' then
    return nil
  end
  local raw = redis.call('HMGET', key, 'type', 'state', 'payload', 'errors', 'key',
    unpack(NUMBERS))
  local workflow = redis.call('HGET', key, 'workflow')
  local sets, dels = {}, {'token', 'lease_until'}
  for index, name in ipairs(NUMBERS) do
    local value = tonumber(raw[5 + index])
    local fine = value ~= nil and value == value and value >= 0 and value < SAFE
      and value == math.floor(value)
    if not fine and raw[5 + index] then
      if REQUIRED[name] then
        sets[#sets + 1] = name
        sets[#sets + 1] = name == 'run_at' and int(now) or (name == 'max_attempts' and '1' or '0')
      else
        dels[#dels + 1] = name
      end
    elseif not raw[5 + index] and REQUIRED[name] then
      sets[#sets + 1] = name
      sets[#sets + 1] = name == 'run_at' and int(now) or (name == 'max_attempts' and '1' or '0')
    end
  end
  if type(raw[3]) ~= 'string' then
    sets[#sets + 1] = 'payload'
    sets[#sets + 1] = 'null'
  end
  if raw[1] ~= source.type then
    sets[#sets + 1] = 'type'
    sets[#sets + 1] = source.type
  end
  local attempt = tonumber(raw[6]) or 0
  if attempt ~= attempt or attempt < 0 or attempt >= SAFE then
    attempt = 0
  end
  local text = 'malformed job record: ' .. why
  local ok, errors = pcall(with_error, raw[4], math.floor(attempt), now, text)
  if not ok then
    errors = cjson.encode({{0, now, text}})
  end
  check_state_indexes(sp_of_call, source.type, source.state, 'failed')
  local from_record = nil
  if STATES[raw[2]] and type(raw[1]) == 'string'
      and (raw[2] ~= source.state or raw[1] ~= source.type) then
    from_record = {raw[2], raw[1]}
    check_state_indexes(sp_of_call, raw[1], raw[2])
  end
  local index = false
  if type(raw[5]) == 'string' then
    local candidate = KEYS[2] .. raw[5]
    if index_names(candidate, c[1]) then
      index = candidate
    end
  end
  local created = tonumber(raw[10])
  if created == nil or created ~= created or created < 0 or created >= SAFE then
    created = now
  end
  local settles = false
  if type(workflow) == 'string' then
    local job = {type = source.type, workflow = workflow}
    local planned, plan = pcall(workflow_check, sp_of_call, key, c[1], job, 'failed', true, now)
    settles = planned and plan
  end
  return {settles = settles, sets = sets, dels = dels, text = text, errors = errors,
    from_record = from_record, index = index, created = math.floor(created)}
end

-- Up to limit due members of a ready zset with their scores (flat, as ZRANGE WITHSCORES), the
-- highest priority first, each priority by run_at (see ready_score). One ZRANGE from the start
-- of a band reads its due members; the first member not yet due ends the band, and the next
-- read starts at the next band. A zset of one priority (the usual) is read in one ZRANGE when
-- it fills the limit; each priority present adds at most one.
local function due_ready(key, now, limit)
  local due, from, n = {}, '-inf', 0
  while n < limit do
    local got = read('zset', 'ZRANGE', key, from, '+inf', 'BYSCORE', 'LIMIT', 0, limit - n,
      'WITHSCORES')
    local next_band = nil
    for j = 1, #got, 2 do
      local score = tonumber(got[j + 1])
      local base = math.floor(score / BAND) * BAND
      if score > base + now then
        next_band = base + BAND
        break
      end
      due[#due + 1] = got[j]
      due[#due + 1] = got[j + 1]
      n = n + 1
    end
    if next_band == nil then
      break  -- the limit is reached, or the zset has no more members
    end
    from = int(next_band)
  end
  return due
end

-- Fleet limits. A limit key's held hash maps a job id to what the claim that took it under the
-- key gave it: '<length of the leased zset name> <leased zset name><lease token>'; its starts
-- zset holds each claim's lease token (unique per claim), scored by the claim's time. Only
-- this script writes them; a settle leaves its holder behind, dropped here once seen dead.
-- A held hash lives a day past the last limited claim of its key (at least two leases, two
-- windows): an abandoned key goes, while a lease held for long (heartbeats do not touch the
-- hash) keeps its place as long as claims of the key go on.
local HELD_TTL_MS = 86400000
-- Dead holders dropped per HDEL (unpack's bound on the Lua stack).
local PRUNE_CHUNK = 1000

-- Whether the holder `id` (value: its held hash value) still holds the lease it was counted
-- for: its record has that token, active, and the lease (the leased zset's score) is after
-- now. A record or zset of the wrong type holds nothing.
local function holds(prefix, id, value, now)
  local space = string.find(value, ' ', 1, true)
  local length = space and tonumber(string.sub(value, 1, space - 1))
  if not length then
    return false
  end
  local record = redis.pcall('HMGET', prefix .. id, 'state', 'token')
  if type(record) ~= 'table' or record['err'] or record[1] ~= 'active'
      or record[2] ~= string.sub(value, space + length + 1) then
    return false
  end
  local expiry = redis.pcall('ZSCORE', string.sub(value, space + 1, space + length), id)
  return type(expiry) == 'string' and tonumber(expiry) > now
end

-- How many holders of the held hash `key` still hold their lease; the others are dropped.
local function live_holders(key, prefix, now)
  local all = read('hash', 'HGETALL', key)
  local live, dead = 0, {}
  for j = 1, #all, 2 do
    if holds(prefix, all[j], all[j + 1], now) then
      live = live + 1
    else
      dead[#dead + 1] = all[j]
    end
  end
  for first = 1, #dead, PRUNE_CHUNK do
    redis.call('HDEL', key, unpack(dead, first, math.min(first + PRUNE_CHUNK - 1, #dead)))
  end
  return live
end

-- The room of a limit (room() in jobs.spi.limits) and, when it is 0, when it admits again
-- (_retry_in): ms, or false while its concurrency is full (it frees at a settle). A claim
-- takes at most `want` jobs, so while the held hash lists `want` fewer than the concurrency
-- its holders are not checked one by one (the room is then a floor, and still caps nothing):
-- a limit far from full costs two commands, and the hash is pruned as it nears full.
local function limit_room(spec, prefix, now, want)
  local room, held_full = nil, false
  if spec.concurrency then
    local live = read('hash', 'HLEN', spec.held)
    if spec.concurrency - live < want then
      live = live_holders(spec.held, prefix, now)
    end
    room = spec.concurrency - live
    held_full = room <= 0
  end
  local oldest = nil
  if spec.rate then
    read('zset', 'ZREMRANGEBYSCORE', spec.starts, '-inf', int(now - spec.per_ms))
    local started = redis.call('ZCARD', spec.starts)
    local left = spec.rate - started
    if room == nil or left < room then
      room = left
    end
    if left <= 0 and started > 0 then
      oldest = tonumber(redis.call('ZRANGE', spec.starts, 0, 0, 'WITHSCORES')[2])
    end
  end
  if room > 0 then
    return room, nil
  end
  if held_full then
    return 0, false
  end
  return 0, math.max(1, (oldest or now) + spec.per_ms - now)
end

-- plan_claim (jobs.spi.limits) over the m limit keys of a claim of n types: the specs, the
-- caps by type (limited types with room), the types held back (by name), retry_ms (-1: none
-- known) and the claim's limit within the queue's room.
local function plan_limits(n, m, prefix, now, limit)
  local specs, caps, held = {}, {}, {}
  local queue_room, unknown, soonest = nil, false, nil
  for j = 1, m do
    local at = 11 + n + 4 * (j - 1)
    local scope = ARGV[at + 1]
    local spec = {
      held = KEYS[4 + 2 * n + 2 * j - 1], starts = KEYS[4 + 2 * n + 2 * j],
      type = scope ~= '' and ARGV[11 + tonumber(scope)] or nil,
      concurrency = tonumber(ARGV[at + 2]), rate = tonumber(ARGV[at + 3]),
      per_ms = tonumber(ARGV[at + 4]), held_ids = {}, starts_tokens = {},
    }
    specs[j] = spec
    local room, wait = limit_room(spec, prefix, now, limit)
    if room == 0 then
      if wait == false then
        unknown = true
      elseif soonest == nil or wait < soonest then
        soonest = wait
      end
    end
    if spec.type == nil then
      queue_room = room
    elseif room == 0 then
      held[spec.type] = true
    else
      caps[spec.type] = room
    end
  end
  if queue_room == 0 then
    for i = 1, n do
      held[ARGV[11 + i]] = true
    end
  end
  if queue_room and queue_room < limit then
    limit = queue_room
  end
  local retry = -1
  if soonest and not unknown then
    retry = soonest
  end
  return specs, caps, held, retry, limit
end

-- Notes a claim of job `id` (from the leased zset `leased`, under `token`) in each limit key
-- that counts its type; claimed_at: the claim's time as text.
local function note_claim(specs, job_type, id, leased, token, claimed_at)
  for _, spec in ipairs(specs) do
    if spec.type == nil or spec.type == job_type then
      if spec.concurrency then
        local ids = spec.held_ids
        ids[#ids + 1] = id
        ids[#ids + 1] = #leased .. ' ' .. leased .. token
      end
      if spec.rate then
        local tokens = spec.starts_tokens
        tokens[#tokens + 1] = claimed_at
        tokens[#tokens + 1] = token
      end
    end
  end
end

-- Writes the noted claims; each held hash's expiry is set anew by every limited claim (see
-- HELD_TTL_MS), a starts zset's by a claim it records (its members matter for per_ms only).
local function record_claims(specs, lease_ms, margin)
  for _, spec in ipairs(specs) do
    if spec.concurrency then
      if #spec.held_ids > 0 then
        redis.call('HSET', spec.held, unpack(spec.held_ids))
      end
      local ttl = math.max(HELD_TTL_MS, 2 * math.max(lease_ms, spec.per_ms)) + margin
      redis.call('PEXPIRE', spec.held, int(ttl))
    end
    if spec.rate and #spec.starts_tokens > 0 then
      redis.call('ZADD', spec.starts, unpack(spec.starts_tokens))
      redis.call('PEXPIRE', spec.starts, int(2 * spec.per_ms + margin))
    end
  end
end

-- The reply of a limited claim: [jobs, held type indexes, retry_ms].
local function limited_reply(jobs, held, n, retry)
  local indexes = {}
  for i = 1, n do
    if held[ARGV[11 + i]] then
      indexes[#indexes + 1] = i
    end
  end
  return '[' .. jobs .. ',[' .. table.concat(indexes, ',') .. '],' .. int(retry) .. ']'
end

-- per call
local now = now_ms(ARGV[1])
local lease_ms, limit = tonumber(ARGV[2]), tonumber(ARGV[3])
local prefix, index_prefix, failed, sp = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local stalled_head, stalled_middle, stalled_tail = ARGV[7], ARGV[8], ARGV[9]
local default_max_stalls = tonumber(ARGV[10])
local limit_keys = tonumber(ARGV[11])
local first_type = 12
local type_count = #ARGV - 11 - 4 * limit_keys
sp_of_call = sp

check_type_once(failed, 'zset')

-- Fleet limits (none on a plain claim): caps[type] is how many more of a limited type this
-- claim may take; a type in held is not read.
local specs, caps, held, retry = nil, nil, nil, -1
if limit_keys > 0 then
  specs, caps, held, retry, limit = plan_limits(type_count, limit_keys, prefix, now, limit)
end

-- Each due set read is that set's type check.
local sources, candidates = {}, {}
for i = 1, type_count do
  local job_type, ready, leased = ARGV[first_type - 1 + i], KEYS[3 + 2 * i], KEYS[4 + 2 * i]
  local last = 4 + 2 * i
  if held and held[job_type] then
    last = 0  -- held back by a full limit: not read
  end
  for from = 3 + 2 * i, last do
    local key = KEYS[from]
    local due
    if key == ready then
      due = due_ready(key, now, limit)
    else
      due = read('zset', 'ZRANGE', key, '-inf', now, 'BYSCORE', 'LIMIT', 0, limit, 'WITHSCORES')
    end
    if #due > 0 then
      local source = {
        key = key, state = key == ready and 'pending' or 'active', type = job_type,
        ready = ready, leased = leased,
      }
      sources[#sources + 1] = source
      for j = 1, #due, 2 do
        candidates[#candidates + 1] = {due[j], tonumber(due[j + 1]), source, false, false,
          false, false, false}
      end
    end
  end
end
if #sources > 1 then
  table.sort(candidates, earlier)
end

-- Checks: read every record to be touched before the first write.
local take, expire, orphans, malformed = {}, {}, {}, {}
for _, c in ipairs(candidates) do
  if #take >= limit then
    break
  end
  -- a limited type at its cap: its candidate is skipped untouched, keeping its place
  if caps == nil or caps[c[3].type] ~= 0 then
    local id, source = c[1], c[3]
    local key = prefix .. id
    c[4] = key
    local ok, job = pcall(check_record, key, source)
    local caught = not ok and (type(job) == 'table' and tostring(job.err) or tostring(job))
    if caught and not string.find(caught, REFUSAL, 1, true) then
      error(job)  -- not a refusal of the record: a fault of the script, which must not pass
    end
    if caught then
      local why = string.sub(caught, string.find(caught, REFUSAL, 1, true) + #REFUSAL)
      local plan = quarantine_plan(c, why, now)
      check_state_indexes(sp, source.type, source.state)
      if plan == nil then
        orphans[#orphans + 1] = c
      else
        c[5] = plan
        malformed[#malformed + 1] = c
      end
    elseif job == nil then
      check_state_indexes(sp, source.type, source.state)
      orphans[#orphans + 1] = c
    else
      c[5] = job
      local max_stalls = job.max_stalls or default_max_stalls
      if source.state == 'active' and (job.stalls or 0) >= max_stalls then
        local more = redis.call('HMGET', key, 'keep_until', 'errors', 'workflow')
        job.keep_until = more[1] and tonumber(more[1])
        if job.keep_until and (job.keep_until ~= job.keep_until or job.keep_until >= SAFE) then
          job.keep_until = nil
        end
        check_state_indexes(sp, source.type, 'active', 'failed')
        local stalls = (job.stalls or 0) + 1
        job.stalled_text = stalled_head .. int(stalls) .. stalled_middle .. int(max_stalls)
          .. stalled_tail
        job.stalls = stalls
        local made, errors = pcall(with_error, more[2], job.attempts, now, job.stalled_text)
        c[6] = made and errors or cjson.encode({{job.attempts, now, job.stalled_text}})
        if job.key then
          local index = index_prefix .. job.key
          if index_names(index, id) then
            c[7] = index
          end
        end
        if more[3] then
          job.workflow = more[3]
          local planned, plan = pcall(workflow_check, sp, key, id, job, 'failed', true, now)
          c[8] = planned and plan
        end
        expire[#expire + 1] = c
      else
        if source.state == 'pending' then
          check_state_indexes(sp, source.type, 'pending', 'active')
        end
        take[#take + 1] = c
        local cap = caps and caps[source.type]
        if cap then
          caps[source.type] = cap - 1
        end
      end
    end
  end
end

-- Writes.
for _, c in ipairs(orphans) do
  local source = c[3]
  later_zrem(source.key, c[1])
  later_move(sp, c[1], source.type, 0, source.state, nil)
end
if #expire > 0 or #malformed > 0 then
  call.now, call.now_text = now, int(now)
  call.retain, call.margin = tonumber(ARGV[5]), tonumber(ARGV[6])
  call.finished, call.sp = failed, sp
  for _, c in ipairs(expire) do
    redis.call('HSET', c[4], 'stalls', int(c[5].stalls))
    finish(call, c[4], c[1], c[5], 'failed', 'active', c[3].leased, c[7], c[5].stalled_text,
      c[6])
    if c[8] then
      workflow_apply(c[8], now, call.retain, call.margin)
    end
  end
  for _, c in ipairs(malformed) do
    local id, source, key, plan = c[1], c[3], c[4], c[5]
    if #plan.sets > 0 then
      redis.call('HSET', key, unpack(plan.sets))
    end
    redis.call('HDEL', key, unpack(plan.dels))
    if plan.from_record then
      later_move(sp, id, plan.from_record[2], 0, plan.from_record[1], nil)
    end
    local job = {type = source.type, created_at = plan.created}
    finish(call, key, id, job, 'failed', source.state, source.key, plan.index, plan.text,
      plan.errors)
    if plan.settles then
      workflow_apply(plan.settles, now, call.retain, call.margin)
    end
  end
end
local reply = {}
local lease_until = int(now + lease_ms)
local claimed_at = specs and int(now)
local token_middle = ':' .. ARGV[4] .. '.'
for n, c in ipairs(take) do
  local id, source, key, job = c[1], c[3], c[4], c[5]
  local attempt, stalls = job.attempts, job.stalls or 0
  if source.state == 'pending' then
    attempt = attempt + 1
  else
    stalls = stalls + 1
  end
  local token = int(attempt) .. token_middle .. n .. ':' .. source.type
  if source.state == 'pending' then
    redis.call('HSET', key, 'state', 'active', 'attempts', int(attempt), 'token', token)
    later_zrem(source.ready, id)
    later_move(sp, id, source.type, created_of(job), 'pending', 'active')
  else
    redis.call('HSET', key, 'stalls', int(stalls), 'token', token)
  end
  later_zadd(source.leased, lease_until, id)
  if specs then
    note_claim(specs, source.type, id, source.leased, token, claimed_at)
  end
  reply[n] = {id, source.type, job.payload, attempt, job.max_attempts, token,
    job.timeout_ms, job.key, job.trace_context, source.state == 'active', job.run_at, stalls,
    job.depends_on}
end
write_later(0, 0)
if specs then
  record_claims(specs, lease_ms, tonumber(ARGV[6]))
  return limited_reply(#reply == 0 and '[]' or cjson.encode(reply), held, type_count, retry)
end
if #reply == 0 then
  return '[]'
end
return cjson.encode(reply)
