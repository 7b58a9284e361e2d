-- peek.lua: when the next job of the given types is due, for an idle runner about to block.
--
-- KEYS[3i - 2]  ready zset of type i      KEYS[3i - 1]  leased zset of type i
-- KEYS[3i]      signal list of type i     (i = 1..n)
-- ARGV[1]  now ms, or '' for the server's TIME
--
-- Returns {now, earliest due ms or -1 when none}. When nothing is due yet, the signal lists are
-- emptied in the same atomic step: every job signalled so far has been claimed or is accounted
-- for by the returned due time, so the runner's BLPOP wakes only for what comes after this call.
-- Each zset's first ZRANGE is its type check; a ready zset is read once per priority present.

local now = now_ms(ARGV[1])
local earliest = -1
for i = 1, #KEYS, 3 do
  check_type(KEYS[i + 2], 'list')
  each_band(KEYS[i], function(base, score)  -- each priority's earliest (ready_score)
    local due = score - base
    if earliest < 0 or due < earliest then
      earliest = due
    end
    return due <= now  -- one due now answers
  end)
  local head = read('zset', 'ZRANGE', KEYS[i + 1], 0, 0, 'WITHSCORES')
  if #head > 0 then
    local due = tonumber(head[2])
    if earliest < 0 or due < earliest then
      earliest = due
    end
  end
end
if earliest < 0 or earliest > now then
  for i = 3, #KEYS, 3 do
    redis.call('DEL', KEYS[i])
  end
end
return {now, earliest}
