-- Read a table's public stream from where the dealer's view of it stopped, with one of the
-- dealer's own hashes of the same table (a hand's record), in one read-only call
-- (services/dealer/store.py, TableReader; issue 35): what studkit's EventStore.tail reads in
-- a MULTI (the version, the trimmed count, a page of events and the hash), one reply to
-- parse instead of seven. Run with EVALSHA_RO: the dealer's ACL user may only read the
-- table's keys.
--
-- KEYS[1] the table's version   KEYS[2] its trimmed count   KEYS[3] its event stream
-- KEYS[4] (optional) a hash of the dealer's of the same table
-- ARGV[1] the first id, exclusive ('(0-<version>')   ARGV[2] the page size
-- Returns {version or nil, trimmed or nil, the entries as XRANGE gives them, the hash as
-- HGETALL gives it (nil without KEYS[4])}.

local hash = false
if KEYS[4] then
  hash = redis.call('HGETALL', KEYS[4])
end
return {redis.call('GET', KEYS[1]), redis.call('GET', KEYS[2]),
        redis.call('XRANGE', KEYS[3], ARGV[1], '+', 'COUNT', ARGV[2]), hash}
