-- Create one hand's deck record if it does not exist yet (services/dealer/store.py).
--
-- KEYS[1] the hand's hash (stud:dealer:{table}:hand:<n>)
-- ARGV[1] order (52 bytes)   ARGV[2] reshuffle key (52 bytes)   ARGV[3] salt (32 bytes)
-- ARGV[4] commitment (hex)   ARGV[5] created at (ms)
-- and, for a per-card commitment (docs/fairness.md), ARGV[6] the card commitment (hex),
-- ARGV[7] the card salts (52 x 32 bytes), ARGV[8] the dealer's seed (32 bytes), ARGV[9] the
-- players' seed commitments (JSON).
--
-- The first writer wins: a second StartHand for the same hand (a retry, or a race) never
-- replaces the deck; it gets the stored commitments back. Returns {created, commitment,
-- card commitment or ''}.

local existing = redis.call('HGET', KEYS[1], 'commitment')
if existing then
  return {0, existing, redis.call('HGET', KEYS[1], 'card_commitment') or ''}
end
redis.call('HSET', KEYS[1], 'order', ARGV[1], 'reshuffle_key', ARGV[2], 'salt', ARGV[3],
           'commitment', ARGV[4], 'created_ms', ARGV[5], 'deals', 0)
if ARGV[6] and ARGV[6] ~= '' then
  redis.call('HSET', KEYS[1], 'card_commitment', ARGV[6], 'card_salts', ARGV[7],
             'dealer_seed', ARGV[8], 'seed_commitments', ARGV[9])
end
return {1, ARGV[4], ARGV[6] or ''}
