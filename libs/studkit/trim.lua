-- Remove a table's archived events from the head of its stream (atomic; stud archive).
--
-- KEYS[1] stream    stud:table:{id}:events
-- KEYS[2] version   stud:table:{id}:version   events ever appended
-- KEYS[3] trimmed   stud:table:{id}:trimmed   events removed from the head so far
-- KEYS[4] snapshot  stud:table:{id}:snapshot  the repository's snapshot (hash, field version)
-- KEYS[5] commands  stud:table:{id}:commands  the command records (optional): a record whose
--                                             outcome's version is at most upto goes too
--                                             (the archiver copied it to PostgreSQL first)
-- ARGV[1] the trimmed count the caller archived from (its compare-and-set guard),
-- ARGV[2] upto: remove the events 1..upto (those with ids <= 0-<upto>).
-- ARGV[3] commands_upto (optional, default upto, never past it): the command records whose
--         outcome's version is at most this go (the archiver keeps the idempotency window's
--         records, docs/history.md "Expired commands"; a later trim takes them).
--
-- Replies: {"trimmed", upto} | {"conflict", current_trimmed} (someone trimmed meanwhile) |
-- {"no_snapshot", snapshot_version} (the table could not load without the removed events) |
-- {"beyond", version} (upto is past the stream's end).
-- Every check happens before XTRIM; afterwards XLEN + trimmed == version still holds, which
-- append.lua checks before every append. All keys carry the table's hash tag (one slot).

local stream, version_key, trimmed_key, snapshot = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local expected = tonumber(ARGV[1])
local upto = tonumber(ARGV[2])

local trimmed = tonumber(redis.call('GET', trimmed_key) or '0')
if trimmed ~= expected then
  return {'conflict', trimmed}
end
local version = tonumber(redis.call('GET', version_key) or '0')
if upto > version then
  return {'beyond', version}
end
local at = tonumber(redis.call('HGET', snapshot, 'version') or '-1')
if at < upto then
  return {'no_snapshot', at}
end
local length = redis.call('XLEN', stream)
if length + trimmed ~= version then
  return redis.error_reply('STORECORRUPT stream length ' .. length .. ' + trimmed ' .. trimmed
                           .. ' != version ' .. version)
end
if upto <= trimmed then
  return {'trimmed', trimmed}
end
local first = redis.call('XRANGE', stream, '-', '+', 'COUNT', 1)
if first[1] == nil or first[1][1] ~= string.format('0-%d', trimmed + 1) then
  return redis.error_reply('STORECORRUPT the stream does not start at event ' .. (trimmed + 1))
end
redis.call('XTRIM', stream, 'MINID', string.format('0-%d', upto + 1))
redis.call('SET', trimmed_key, string.format('%d', upto))
if KEYS[5] then
  local commands_upto = math.min(tonumber(ARGV[3] or ARGV[2]), upto)
  -- A record is "<version> <entry ids>" under its command id, its fingerprint under
  -- "<command id>#fp" (append.lua). The hash holds the hot window's commands only, so this
  -- walk is bounded.
  local fields = redis.call('HGETALL', KEYS[5])
  for i = 1, #fields, 2 do
    local name = fields[i]
    if string.sub(name, -3) ~= '#fp' then
      local recorded = tonumber(string.match(fields[i + 1], '^(%d+)'))
      if recorded and recorded <= commands_upto then
        redis.call('HDEL', KEYS[5], name, name .. '#fp')
      end
    end
  end
end
return {'trimmed', upto}
