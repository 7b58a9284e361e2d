-- list.lua: one page of jobs, newest first (created_at descending, then id descending).
--
-- KEYS[1]  namespace prefix, '{ns}:' (the state and lane indexes and records are spelled from it)
-- ARGV[1]  now ms, or '' for the server's TIME
-- ARGV[2]  state, or '' for every state      ARGV[3]  job type, or '' for every type
-- ARGV[4]  limit      ARGV[5]  cursor created_at ms, or '' (first page)      ARGV[6]  cursor id
-- ARGV[7]  queue, or '' for every queue
--
-- The page starts strictly after the cursor's (created_at, id), so jobs enqueued while paging
-- neither repeat nor shift pages. Each index is read from the cursor on (ZRANGE BYSCORE REV, a
-- page at a time), so a page costs the same however many jobs the store holds; several
-- indexes are merged. Without a queue: the state indexes (of the type), of the five states or
-- the one asked for. A named queue: its lanes' indexes (see lane_index in common.lua), of the
-- type or of each type it holds: live (pending and active; for 'pending' its active jobs are
-- skipped: as many as run), or that of a finished state; its active jobs are the type's active
-- index less other queues' (skipped: as many as run). The default queue keeps no index of its
-- own: the type's state indexes, less (skipped) the jobs of named queues where the type has a
-- named lane; a finished state of a type none of whose jobs are in "default" is not read.
--
-- A source read with skips (a filter) examines at most SCAN entries a call; when it stops
-- there, the page ends at that entry, maybe short (flag 2 below): the caller calls again from
-- there for the rest of the page. A listed job whose record retention has ended is skipped.
--
-- Returns {flag, resume created_at, resume id, id, fields, id, fields, ...}: fields as HGETALL
-- gives them; flag 0 the last page, 1 more jobs may follow the last listed, 2 the page stops
-- short at the resume entry (it and all before it were read): the rest follows it.

local now = now_ms(ARGV[1])
local ns, state, job_type, queue = KEYS[1], ARGV[2], ARGV[3], ARGV[7] or ''
local limit = tonumber(ARGV[4])
local after_score = ARGV[5] ~= '' and tonumber(ARGV[5]) or nil
local after_id = ARGV[6]
local sp = ns .. 'state:'
local STATE_NAMES = {'pending', 'active', 'completed', 'failed', 'cancelled'}
local FINISHED = {completed = true, failed = true, cancelled = true}
local FILTER_FIELDS = {'expires_at', 'queue'}
local SCAN = math.max(500, 4 * (limit + 1))

local function before_cursor(score, id)
  return after_score == nil or score < after_score or (score == after_score and id < after_id)
end

-- Whether entry a comes before entry b in the listing (newer, or as new with a greater id).
local function newer(a, b)
  if a[1] ~= b[1] then
    return a[1] > b[1]
  end
  return a[2] > b[2]
end

-- A filter: the job is alive, and in the state and queue given (nil: any).
local function want_of(only_state, only_queue)
  return function(id)
    local key = ns .. 'job:' .. id
    local job = load_job(key, FILTER_FIELDS)
    if job == nil or not is_alive(job, key, now) then
      return false
    end
    return (only_state == nil or job.state == only_state)
      and (only_queue == nil or (job.queue or 'default') == only_queue)
  end
end

-- Up to `need` entries {score, id} of `key` after the cursor, newest first, that want accepts
-- (every one when want is nil; then at most SCAN examined); and the last entry examined when
-- the index may hold more past it (nil: it was read to its end).
local function entries(key, need, want)
  check_type(key, 'zset')
  local found, offset, examined, last = {}, 0, 0, nil
  local budget = want and SCAN or need
  local size = want and math.max(need, 100) or need
  local top = after_score and int(after_score) or '+inf'
  while true do
    local batch = redis.call('ZRANGE', key, top, '-inf', 'BYSCORE', 'REV', 'LIMIT', offset,
      size, 'WITHSCORES')
    if #batch == 0 then
      return found, nil
    end
    for i = 1, #batch, 2 do
      local score, id = tonumber(batch[i + 1]), batch[i]
      if before_cursor(score, id) then
        examined = examined + 1
        last = {score, id}
        if want == nil or want(id) then
          found[#found + 1] = last
        end
        if #found == need or examined == budget then
          return found, last
        end
      end
    end
    offset = offset + #batch / 2
  end
end

-- The sources: {index key, filter or nil}.
local sources = {}
local function add(key, want)
  sources[#sources + 1] = {key, want}
end
local names = state ~= '' and {state} or STATE_NAMES
local lanes_key = ns .. 'types:lanes'

if queue == '' then
  for _, name in ipairs(names) do
    add(job_type ~= '' and sp .. name .. ':' .. job_type or sp .. name)
  end
elseif named_queue(queue) then
  local types = {}
  if job_type ~= '' then
    if read('set', 'SISMEMBER', lanes_key, queue .. '/' .. job_type) == 1 then
      types[1] = job_type
    end
  else
    local head = queue .. '/'
    for _, lane in ipairs(read('set', 'SMEMBERS', lanes_key)) do
      if string.sub(lane, 1, #head) == head then
        types[#types + 1] = string.sub(lane, #head + 1)
      end
    end
  end
  for _, lane_type in ipairs(types) do
    if state == '' then
      add(lane_index(ns, 'live', queue, lane_type))
    elseif state == 'pending' then
      add(lane_index(ns, 'live', queue, lane_type), want_of('pending', nil))
    elseif state == 'active' then
      add(sp .. 'active:' .. lane_type, want_of(nil, queue))
    end
    for _, name in ipairs(names) do
      if FINISHED[name] then
        add(lane_index(ns, name, queue, lane_type))
      end
    end
  end
else  -- the default queue
  local named = {}  -- type -> the named queues of its lanes
  for _, lane in ipairs(read('set', 'SMEMBERS', lanes_key)) do
    local slash = string.find(lane, '/', 1, true)
    if slash then
      local lane_type = string.sub(lane, slash + 1)
      named[lane_type] = named[lane_type] or {}
      table.insert(named[lane_type], string.sub(lane, 1, slash - 1))
    end
  end
  local types
  if job_type ~= '' then
    types = {job_type}
  elseif next(named) == nil then
    types = {false}  -- no named queue holds a job: every job is the default queue's
  else
    types = read('set', 'SMEMBERS', ns .. 'types')
  end
  for _, of_type in ipairs(types) do
    for _, name in ipairs(names) do
      local index = of_type and sp .. name .. ':' .. of_type or sp .. name
      local queues = of_type and named[of_type]
      if not queues then
        add(index)
      else
        local in_default = 1
        if FINISHED[name] then
          in_default = check_type(index, 'zset')
          for _, other in ipairs(queues) do
            in_default = in_default - check_type(lane_index(ns, name, other, of_type), 'zset')
          end
        end
        if in_default > 0 then
          add(index, want_of(nil, 'default'))
        end
      end
    end
  end
end

local candidates = {}
local boundary = nil  -- the newest entry past which some source was not read
for _, source in ipairs(sources) do
  local found, last = entries(source[1], limit + 1, source[2])
  for _, entry in ipairs(found) do
    candidates[#candidates + 1] = entry
  end
  if last and (boundary == nil or newer(last, boundary)) then
    boundary = last
  end
end
table.sort(candidates, newer)

local reply = {0, '', ''}
local listed = 0
for _, entry in ipairs(candidates) do
  if listed == limit then
    reply[1] = 1
    break
  end
  if boundary and newer(boundary, entry) then
    reply[1] = 2
    break
  end
  local key = ns .. 'job:' .. entry[2]
  local job = load_job(key, {'expires_at'})
  if job ~= nil and is_alive(job, key, now) then
    reply[#reply + 1] = entry[2]
    reply[#reply + 1] = redis.call('HGETALL', key)
    listed = listed + 1
  end
end
if reply[1] == 0 and boundary then
  reply[1] = listed == limit and 1 or 2
end
if reply[1] == 2 then
  reply[2], reply[3] = int(boundary[1]), boundary[2]
end
return reply
