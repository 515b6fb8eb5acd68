-- Record the cards drawn for one street of a hand, once (services/dealer/store.py).
--
-- KEYS[1] the hand's hash
-- ARGV[1] the street's field (deal:<street>)   ARGV[2] deals recorded when the draw was
-- computed   ARGV[3] the street's record (JSON)
--
-- A street is recorded at most once: a repeat gets the stored record back, so the same request
-- never draws new cards. The draw was computed from the deals recorded so far; if another
-- street was recorded meanwhile the caller must recompute (compare-and-set on `deals`).
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
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3], 'deals', deals + 1)
return {'recorded'}
