-- Conditional, idempotent append of one command's events to a table's stream (atomic).
--
-- KEYS[1] stream    stud:table:{id}:events    one entry per event, explicit id 0-<sequence>
-- KEYS[2] commands  stud:table:{id}:commands  hash: command id -> "<version> <id> <id> ..."
-- KEYS[3] version   stud:table:{id}:version   string: number of events in the stream
-- KEYS[4] owner     stud:table:{id}:owner     hash: replica, epoch, expires (the fence)
-- KEYS[5] trimmed   stud:table:{id}:trimmed   string: events archived and removed from the
--                                             head of the stream (absent: 0; stud archive)
-- ARGV[1] expected version, ARGV[2] command id, ARGV[3] table id,
-- ARGV[4] the command's fingerprint (a hash of what was asked; "" = not checked),
-- ARGV[5] the writer's fencing epoch ("" = a writer outside the ownership scheme, allowed
--         only while the table has no owner record),
-- ARGV[6..] serialized EventEnvelopes, sequences expected+1, expected+2, ... already set.
--
-- Replies: {"duplicate", outcome} | {"conflict", actual_version} | {"appended", outcome} |
-- {"reused", outcome} (the command id was recorded for a command with another fingerprint) |
-- {"not_owner", current_epoch} (the writer's epoch is not the table's: a former owner).
-- A fingerprint is kept in the commands hash under "<command id>#fp".
-- Every check happens before the first write, because Redis does not roll back the writes of
-- a script that fails half-way: either all of a command's events are written or none.
-- Every key carries the table's hash tag, so the script runs on Redis Cluster too; the table
-- index (no tag) is updated by the store after the append (idempotent SADD).

local stream, commands, version_key = KEYS[1], KEYS[2], KEYS[3]
local expected = tonumber(ARGV[1])
local command_id = ARGV[2]

local fingerprint = ARGV[4]
local recorded = redis.call('HGET', commands, command_id)
if recorded then
  local seen = redis.call('HGET', commands, command_id .. '#fp')
  if seen and fingerprint ~= '' and seen ~= fingerprint then
    return {'reused', recorded}
  end
  return {'duplicate', recorded}
end

local epoch = ARGV[5]
local fence = redis.call('HGET', KEYS[4], 'epoch')
if fence and fence ~= epoch then
  return {'not_owner', tonumber(fence)}
end

local current = tonumber(redis.call('GET', version_key) or '0')
if current ~= expected then
  return {'conflict', current}
end

-- The stream holds every event not yet archived: its length plus the events trimmed from
-- its head is the version. A mismatch means something wrote to (or trimmed) the stream behind
-- the store's back, and appending would break the 0-<seq> ids.
local length = redis.call('XLEN', stream)
local trimmed = tonumber(redis.call('GET', KEYS[5]) or '0')
if length + trimmed ~= current then
  return redis.error_reply('STORECORRUPT stream length ' .. length .. ' + trimmed ' .. trimmed
                           .. ' != version ' .. current)
end

local ids = {}
for i = 6, #ARGV do
  local sequence = current + (i - 5)
  ids[#ids + 1] = redis.call('XADD', stream, string.format('0-%d', sequence), 'envelope', ARGV[i])
end
local version = current + #ids
local outcome = string.format('%d', version)
if #ids > 0 then
  outcome = outcome .. ' ' .. table.concat(ids, ' ')
  redis.call('SET', version_key, string.format('%d', version))
end
redis.call('HSET', commands, command_id, outcome)
if fingerprint ~= '' then
  redis.call('HSET', commands, command_id .. '#fp', fingerprint)
end
return {'appended', outcome}
