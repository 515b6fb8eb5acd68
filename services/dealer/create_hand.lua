-- Create one hand's deck record if it does not exist yet (services/dealer/store.py).
--
-- KEYS[1] the hand's hash (stud:dealer:{table}:hand:<n>)
-- ARGV[1] order (52 bytes)   ARGV[2] reshuffle key (52 bytes)   ARGV[3] salt (32 bytes)
-- ARGV[4] commitment (hex)   ARGV[5] created at (ms)
--
-- The first writer wins: a second StartHand for the same hand (a retry, or a race) never
-- replaces the deck; it gets the stored commitment back. Returns {created, commitment}.

local existing = redis.call('HGET', KEYS[1], 'commitment')
if existing then
  return {0, existing}
end
redis.call('HSET', KEYS[1], 'order', ARGV[1], 'reshuffle_key', ARGV[2], 'salt', ARGV[3],
           'commitment', ARGV[4], 'created_ms', ARGV[5], 'deals', 0)
return {1, ARGV[4]}
