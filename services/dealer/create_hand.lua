-- Create one hand's deck record if it does not exist yet (services/dealer/store.py).
--
-- KEYS[1] the hand's hash (stud:dealer:{table}:hand:<n>)
-- KEYS[2] (a per-card hand) the players' seed commitments for it (stud:dealer:{table}:seeds:<n>)
-- ARGV[1] order (52 bytes)   ARGV[2] reshuffle key (52 bytes)   ARGV[3] salt (32 bytes)
-- ARGV[4] commitment (hex)   ARGV[5] created at (ms)
-- and, for a per-card commitment (docs/fairness.md), ARGV[6] the card commitment (hex),
-- ARGV[7] the card salts (52 x 32 bytes), ARGV[8] the dealer's seed (32 bytes), ARGV[9] the
-- players' seed commitments the card commitment binds (JSON [[player, commitment], ...]),
-- ARGV[10] how long the closed commitments are kept (s).
--
-- The first writer wins: a second StartHand for the same hand (a retry, or a race) never
-- replaces the deck; it gets the stored commitments back. A per-card hand is created only if
-- the seed commitments taken for it are exactly ARGV[9] (else a seed was committed since they
-- were read: nothing is written, the caller closes them and commits again), and closes them:
-- no seed is committed for the hand after its cards are. Returns {created, commitment, card
-- commitment or ''}: created 1, 0 (the stored hand's) or -1 (the seeds changed).

local existing = redis.call('HGET', KEYS[1], 'commitment')
if existing then
  return {0, existing, redis.call('HGET', KEYS[1], 'card_commitment') or ''}
end
if KEYS[2] then
  local held, count = {}, 0
  local flat = redis.call('HGETALL', KEYS[2])
  for i = 1, #flat, 2 do
    if flat[i] ~= '~closed' then
      held[flat[i]] = flat[i + 1]
      count = count + 1
    end
  end
  local bound = cjson.decode(ARGV[9])
  if count ~= #bound then
    return {-1, '', ''}
  end
  for _, pair in ipairs(bound) do
    if held[pair[1]] ~= pair[2] then
      return {-1, '', ''}
    end
  end
  redis.call('HSET', KEYS[2], '~closed', '1')
  redis.call('EXPIRE', KEYS[2], tonumber(ARGV[10]))
end
redis.call('HSET', KEYS[1], 'order', ARGV[1], 'reshuffle_key', ARGV[2], 'salt', ARGV[3],
           'commitment', ARGV[4], 'created_ms', ARGV[5], 'deals', 0)
if ARGV[6] and ARGV[6] ~= '' then
  redis.call('HSET', KEYS[1], 'card_commitment', ARGV[6], 'card_salts', ARGV[7],
             'dealer_seed', ARGV[8], 'seed_commitments', ARGV[9])
end
return {1, ARGV[4], ARGV[6] or ''}
