-- Conditional, idempotent append of one command's events to a table's stream (atomic).
--
-- KEYS[1] stream    stud:table:{id}:events    one entry per event, explicit id 0-<sequence>
-- KEYS[2] commands  stud:table:{id}:commands  hash: command id -> "<version> <id> <id> ..."
-- KEYS[3] version   stud:table:{id}:version   string: number of events in the stream
-- KEYS[4] owner     stud:table:{id}:owner     hash: replica, epoch, expires (the fence)
-- KEYS[5] trimmed   stud:table:{id}:trimmed   string: events archived and removed from the
--                                             head of the stream (absent: 0; stud archive)
-- KEYS[6] chain     stud:table:{id}:chain     hash: head (the digest of the last event's
--                                             stored bytes), since (the first sequence whose
--                                             envelope carries a link; studkit.chain)
-- ARGV[1] expected version, ARGV[2] command id, ARGV[3] table id,
-- ARGV[4] the command's fingerprint (a hash of what was asked; "" = not checked),
-- ARGV[5] the writer's fencing epoch ("" = a writer outside the ownership scheme, allowed
--         only while the table has no owner record),
-- ARGV[6] the link the first envelope carries (its prev_digest: the digest of the stored
--         bytes of event `expected`, or GENESIS, 32 zero bytes, for a stream's first event),
-- ARGV[7] the digest of the last envelope's bytes (the stream's head after the append),
-- ARGV[8..] serialized EventEnvelopes, sequences expected+1, expected+2, ... already set, and
--         chained by the store (each one's prev_digest is the digest of the one before).
--
-- Replies: {"duplicate", outcome} | {"conflict", actual_version} | {"appended", outcome} |
-- {"reused", outcome} (the command id was recorded for a command with another fingerprint) |
-- {"not_owner", current_epoch} (the writer's epoch is not the table's: a former owner) |
-- {"broken_link", head} (the first envelope does not link to the stream's head).
-- The script compares links and keeps the head; it cannot hash (Lua has no SHA-256), so it
-- takes ARGV[6] and ARGV[7] as the store computed them: whether the stored bytes hash to what
-- the chain says is checked by readers (studkit.chain, stud replay verify).
-- A fingerprint is kept in the commands hash under "<command id>#fp".
-- Every check happens before the first write, because Redis does not roll back the writes of
-- a script that fails half-way: either all of a command's events are written or none.
-- Every key carries the table's hash tag, so the script runs on Redis Cluster too. The table
-- index (stud:table:index, no tag) is not written here: the store adds the table to it with an
-- idempotent SADD BEFORE a table's first append runs this script, so a crash between the two
-- leaves at most an indexed table without events (readers take it as empty), never events of
-- a table the index does not list (readers find tables only through the index); see
-- tests/integration/studkit/test_append_order.py.

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

-- The chain. A stream without a head yet: a new one links to GENESIS; one written before
-- the chain existed links to the digest of its last stored event (the store read it), and
-- its chain is recorded as starting at the first event appended now.
local chain = KEYS[6]
if #ARGV >= 8 then
  local head = redis.call('HGET', chain, 'head')
  if head then
    if head ~= ARGV[6] then
      return {'broken_link', head}
    end
  else
    local genesis = string.rep('\0', 32)
    if current == 0 and ARGV[6] ~= genesis then
      return {'broken_link', genesis}
    end
    redis.call('HSET', chain, 'since', string.format('%d', current + 1))
  end
end

local ids = {}
for i = 8, #ARGV do
  local sequence = current + (i - 7)
  ids[#ids + 1] = redis.call('XADD', stream, string.format('0-%d', sequence), 'envelope', ARGV[i])
end
local version = current + #ids
local outcome = string.format('%d', version)
if #ids > 0 then
  outcome = outcome .. ' ' .. table.concat(ids, ' ')
  redis.call('SET', version_key, string.format('%d', version))
  redis.call('HSET', chain, 'head', ARGV[7])
end
redis.call('HSET', commands, command_id, outcome)
if fingerprint ~= '' then
  redis.call('HSET', commands, command_id .. '#fp', fingerprint)
end
return {'appended', outcome}
