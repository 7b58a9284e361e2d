-- workers.lua: the registry of live workers: register (or refresh), deregister, list.
--
-- KEYS[1]  workers hash (id -> registration JSON)    KEYS[2]  workers zset (id, score = expiry)
-- ARGV[1]  now ms, or '' for the server's TIME       ARGV[2]  'register', 'deregister' or 'list'
-- register:    ARGV[3] id   ARGV[4] registration JSON   ARGV[5] ttl ms
-- deregister:  ARGV[3] id
--
-- A registration not refreshed within its ttl is gone (pruned by any call); started_at is kept
-- across refreshes of a live record, last_seen is now. Both keys expire a while after the
-- last registration, so a namespace whose workers all went leaves nothing behind.
-- list returns a JSON array of the live registrations, each with started_at and last_seen.

local KEEP_MS = 86400000

local now = now_ms(ARGV[1])
local records, seen, op = KEYS[1], KEYS[2], ARGV[2]
check_type(records, 'hash')
check_type(seen, 'zset')

local gone = redis.call('ZRANGE', seen, '-inf', now, 'BYSCORE')
if #gone > 0 then
  redis.call('HDEL', records, unpack(gone))
  redis.call('ZREM', seen, unpack(gone))
end

if op == 'register' then
  local id, ttl = ARGV[3], tonumber(ARGV[5])
  local ok, worker = pcall(cjson.decode, ARGV[4])
  if not ok or type(worker) ~= 'table' then
    refuse('a worker registration is not a JSON object')
  end
  worker.started_at = now
  local previous = redis.call('HGET', records, id)
  if previous then
    local was_ok, was = pcall(cjson.decode, previous)
    if was_ok and type(was) == 'table' and was.started_at then
      worker.started_at = was.started_at
    end
  end
  worker.last_seen = now
  redis.call('HSET', records, id, cjson.encode(worker))
  redis.call('ZADD', seen, int(now + ttl), id)
  redis.call('PEXPIRE', records, ttl + KEEP_MS)
  redis.call('PEXPIRE', seen, ttl + KEEP_MS)
  return 1
elseif op == 'deregister' then
  redis.call('HDEL', records, ARGV[3])
  redis.call('ZREM', seen, ARGV[3])
  return 1
end
local live = redis.call('ZRANGE', seen, 0, -1)
if #live == 0 then
  return '[]'
end
local list = {}
for _, value in ipairs(redis.call('HMGET', records, unpack(live))) do
  if value then
    list[#list + 1] = value
  end
end
return '[' .. table.concat(list, ',') .. ']'
