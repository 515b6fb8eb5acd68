-- Record the cards drawn for one street of a hand, once (services/dealer/store.py).
--
-- KEYS[1] the hand's hash
-- ARGV[1] the street's field (deal:<street>)   ARGV[2] deals recorded when the draw was
-- computed   ARGV[3] the street's record (JSON)
-- and, for a per-card hand whose seeds no deal froze yet (docs/fairness.md), ARGV[4] 'freeze'
-- and ARGV[5..] the players whose opened seeds the draw was computed from: the seeds are
-- frozen with this street (no seed is taken after it), only if exactly those are opened.
--
-- A street is recorded at most once: a repeat gets the stored record back, so the same request
-- never draws new cards. The draw was computed from the deals recorded so far; if another
-- street was recorded meanwhile, or (with 'freeze') the opened seeds are not the ones the draw
-- was computed from, the caller must recompute (compare-and-set on `deals` and the seeds).
-- Returns {'recorded'}, {'exists', record}, {'conflict', deals} or {'missing'}.

if redis.call('EXISTS', KEYS[1]) == 0 then
  return {'missing'}
end
local existing = redis.call('HGET', KEYS[1], ARGV[1])
if existing then
  return {'exists', existing}
end
local deals = tonumber(redis.call('HGET', KEYS[1], 'deals') or '0')
if deals ~= tonumber(ARGV[2]) then
  return {'conflict', deals}
end
if ARGV[4] == 'freeze' then
  local expected = {}
  for i = 5, #ARGV do expected['seed:' .. ARGV[i]] = true end
  local opened = 0
  for _, name in ipairs(redis.call('HKEYS', KEYS[1])) do
    if string.sub(name, 1, 5) == 'seed:' then
      if not expected[name] then return {'conflict', deals} end
      opened = opened + 1
    end
  end
  if opened ~= #ARGV - 4 then
    return {'conflict', deals}
  end
  redis.call('HSET', KEYS[1], 'seeds_frozen', '1')
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3], 'deals', deals + 1)
return {'recorded'}
