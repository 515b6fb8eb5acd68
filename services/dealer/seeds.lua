-- The players' seeds of one hand (services/dealer/store.py, docs/fairness.md).
--
-- KEYS[1] the hand's commitments before it starts (stud:dealer:{table}:seeds:<n>)
-- KEYS[2] the hand's hash (stud:dealer:{table}:hand:<n>)
-- ARGV[1] the operation:
--   'commit' player commitment max ttl_s: take a player's seed commitment, unless the hand's
--            commitments are closed (StartHand took them) or the hand has a deck; returns
--            'ok', 'too_late' or 'too_many'.
--   'close'  ttl_s: close the commitments (no more are taken) and return them as a flat
--            [player, commitment, ...] list; a repeat returns the same.
--   'open'   player seed: keep an opened seed, unless the seeds were frozen by the first
--            deal; returns 'ok' (a repeat of the same seed too), 'too_late' or 'missing'.
--   'freeze' : no seed is taken from now on; returns the hand's hash as frozen, a flat
--            [field, value, ...] list sorted by field (the first deal decides on it
--            without reading the hand again).
local op = ARGV[1]

-- Byte order (Lua's '<' on strings follows the server's locale), as Python sorts bytes.
local function bytewise_before(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end

if op == 'commit' then
  if redis.call('EXISTS', KEYS[2]) == 1 or redis.call('HEXISTS', KEYS[1], '~closed') == 1 then
    return 'too_late'
  end
  if redis.call('HEXISTS', KEYS[1], ARGV[2]) == 0
      and redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[4]) then
    return 'too_many'
  end
  redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
  redis.call('EXPIRE', KEYS[1], tonumber(ARGV[5]))
  return 'ok'
elseif op == 'close' then
  redis.call('HSET', KEYS[1], '~closed', '1')
  redis.call('EXPIRE', KEYS[1], tonumber(ARGV[2]))
  return redis.call('HGETALL', KEYS[1])
elseif op == 'open' then
  if redis.call('HEXISTS', KEYS[2], 'card_commitment') == 0 then
    return 'missing'
  end
  local field = 'seed:' .. ARGV[2]
  local held = redis.call('HGET', KEYS[2], field)
  if held then
    if held == ARGV[3] then return 'ok' end
    return 'too_late'
  end
  if redis.call('HEXISTS', KEYS[2], 'seeds_frozen') == 1 then
    return 'too_late'
  end
  redis.call('HSET', KEYS[2], field, ARGV[3])
  return 'ok'
elseif op == 'freeze' then
  redis.call('HSET', KEYS[2], 'seeds_frozen', '1')
  local flat = redis.call('HGETALL', KEYS[2])
  local pairs_ = {}
  for i = 1, #flat, 2 do pairs_[#pairs_ + 1] = {flat[i], flat[i + 1]} end
  table.sort(pairs_, function(a, b) return bytewise_before(a[1], b[1]) end)
  local out = {}
  for _, pair in ipairs(pairs_) do
    out[#out + 1] = pair[1]
    out[#out + 1] = pair[2]
  end
  return out
end
return redis.error_reply('unknown operation')
