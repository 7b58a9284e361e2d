-- list.lua: one page of jobs, newest first (created_at descending, then id descending).
--
-- KEYS[1]  namespace prefix, '{ns}:' (the state indexes and records are spelled from it)
-- ARGV[1]  now ms, or '' for the server's TIME
-- ARGV[2]  state, or '' for every state      ARGV[3]  job type, or '' for every type
-- ARGV[4]  limit      ARGV[5]  cursor created_at ms, or '' (first page)      ARGV[6]  cursor id
--
-- The page starts strictly after the cursor's (created_at, id), so jobs enqueued while paging
-- neither repeat nor shift pages. Each state index is read from the cursor on (ZRANGE BYSCORE
-- REV, a page at a time), so a page costs the same however many jobs the store holds; without
-- a state, the indexes of the five states are merged. Returns {more (0/1), id, fields, id,
-- fields, ...}: fields as HGETALL gives them. A listed job whose record retention has ended is
-- skipped.

local now = now_ms(ARGV[1])
local ns, state, job_type = KEYS[1], ARGV[2], ARGV[3]
local limit = tonumber(ARGV[4])
local after_score = ARGV[5] ~= '' and tonumber(ARGV[5]) or nil
local after_id = ARGV[6]
local STATE_NAMES = {'pending', 'active', 'completed', 'failed', 'cancelled'}

local function index_of(name)
  local key = ns .. 'state:' .. name
  if job_type ~= '' then
    key = key .. ':' .. job_type
  end
  return key
end

local function before_cursor(score, id)
  return after_score == nil or score < after_score or (score == after_score and id < after_id)
end

-- Up to `need` entries {score, id} of `key` after the cursor, newest first.
local function entries(key, need)
  check_type(key, 'zset')
  local found, offset = {}, 0
  local top = after_score and int(after_score) or '+inf'
  while #found < need do
    local batch = redis.call('ZRANGE', key, top, '-inf', 'BYSCORE', 'REV', 'LIMIT', offset,
      need, 'WITHSCORES')
    if #batch == 0 then
      break
    end
    for i = 1, #batch, 2 do
      local score = tonumber(batch[i + 1])
      if before_cursor(score, batch[i]) and #found < need then
        found[#found + 1] = {score, batch[i]}
      end
    end
    offset = offset + #batch / 2
  end
  return found
end

local candidates = {}
local names = state ~= '' and {state} or STATE_NAMES
for _, name in ipairs(names) do
  for _, entry in ipairs(entries(index_of(name), limit + 1)) do
    candidates[#candidates + 1] = entry
  end
end
table.sort(candidates, function(a, b)
  if a[1] ~= b[1] then
    return a[1] > b[1]
  end
  return a[2] > b[2]
end)

local reply = {0}
local listed = 0
for _, entry in ipairs(candidates) do
  if listed == limit then
    reply[1] = 1
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
return reply
