-- Apply one wallet transaction atomically (services/wallet/store.py builds the arguments).
--
-- KEYS[1] ledger stream          KEYS[2] balances hash (account -> int)
-- KEYS[3] idempotency hash       KEYS[4] player accounts hash (player id -> created ms)
-- KEYS[5] seat holders of the transaction's table (seat -> player id)
-- KEYS[6] last settled hand per table (table id -> hand id)
-- KEYS[7] the record of the transaction's tournament pool (a hash: 'entry:<id>' -> JSON,
--         'prize:<key>' -> JSON, 'terms' -> '<buy_in>:<fee>', 'standing:<player>' -> count,
--         'entries' and 'prizes' -> counts); a placeholder never written when it has none
-- KEYS[7 + i] the statement stream of the account of posting i
-- ARGV[1] idempotency scope      ARGV[2] fingerprint of the command
-- ARGV[3] plan (JSON; amounts are decimal strings)
-- ARGV[4] ledger record (JSON, stored verbatim)
--
-- Order: a scope already applied returns its stored outcome (or a mismatch) before anything
-- else, so a retry answers the original outcome even when balances have moved since. Then
-- every check runs before the first write, so a refusal changes nothing.
-- Returns {'ok', outcome_json, replayed} or {'error', reason, detail}.

local MAX = 9007199254740991

local scope, fingerprint = ARGV[1], ARGV[2]
local seen = redis.call('HGET', KEYS[3], scope)
if seen then
  local record = cjson.decode(seen)
  if record.fingerprint ~= fingerprint then
    return {'error', 'idempotency_key_reused', scope}
  end
  return {'ok', record.outcome, 1}
end

local plan = cjson.decode(ARGV[3])

for _, player in ipairs(plan.players) do
  if redis.call('HEXISTS', KEYS[4], player) == 0 then
    return {'error', 'unknown_account', 'player:' .. player}
  end
end

for _, rule in ipairs(plan.seats) do
  local holder = redis.call('HGET', KEYS[5], rule.seat)
  if rule.action == 'claim' then
    if holder and holder ~= rule.player then
      return {'error', 'seat_taken', 'seat ' .. rule.seat .. ' is held for another player'}
    end
  elseif holder ~= rule.player then
    return {'error', 'seat_not_held', 'seat ' .. rule.seat .. ' is not held for ' .. rule.player}
  end
end

local pool = plan.pool
local entry_field = pool and ('entry:' .. pool.ref)
if pool and pool.action == 'enter' then
  if redis.call('HEXISTS', KEYS[7], entry_field) == 1 then
    return {'error', 'entry_exists', 'entry ' .. pool.ref .. ' exists'}
  end
  local terms = redis.call('HGET', KEYS[7], 'terms')
  if terms and terms ~= pool.buy_in .. ':' .. pool.fee then
    return {'error', 'terms_mismatch', 'the buy-in and fee are ' .. terms}
  end
elseif pool and pool.action == 'refund' then
  local raw = redis.call('HGET', KEYS[7], entry_field)
  if not raw then
    return {'error', 'unknown_entry', pool.tournament .. ':' .. pool.ref}
  end
  local entry = cjson.decode(raw)
  if entry.player ~= pool.player then
    return {'error', 'entry_of_another_player', 'entry ' .. pool.ref}
  end
  if entry.refunded == 1 then
    return {'error', 'entry_refunded', 'entry ' .. pool.ref .. ' was refunded'}
  end
  if entry.buy_in ~= pool.buy_in or entry.fee ~= pool.fee then
    return {'error', 'balance_changed', 'entry ' .. pool.ref}
  end
elseif pool and pool.action == 'prize' then
  if tonumber(redis.call('HGET', KEYS[7], 'standing:' .. pool.player) or '0') < 1 then
    return {'error', 'not_entered', pool.player .. ' has no standing entry'}
  end
end

local before = {}
local function balance(account)
  if before[account] == nil then
    before[account] = tonumber(redis.call('HGET', KEYS[2], account) or '0')
  end
  return before[account]
end

for _, guard in ipairs(plan.guards) do
  local have, want = balance(guard.account), tonumber(guard.value)
  if guard.op == 'at_least' and have < want then
    return {'error', 'insufficient_funds', guard.account}
  end
  if guard.op == 'exactly' and have ~= want then
    return {'error', 'balance_changed', guard.account}
  end
end

local after, posting_after = {}, {}
for i, posting in ipairs(plan.postings) do
  local account = posting.account
  local value = (after[account] or balance(account)) + tonumber(posting.amount)
  if value < 0 and account ~= 'external' then
    return {'error', 'insufficient_funds', account}
  end
  if value > MAX or value < -MAX then
    return {'error', 'balance_limit', account}
  end
  after[account] = value
  posting_after[i] = value
end

-- All checks passed: write.
local tx_id = redis.call('XADD', KEYS[1], '*', 'tx', ARGV[4], 'scope', scope)
for account, value in pairs(after) do
  redis.call('HSET', KEYS[2], account, string.format('%d', value))
end
for i, posting in ipairs(plan.postings) do
  redis.call('XADD', KEYS[7 + i], '*',
    'tx_id', tx_id, 'kind', plan.kind, 'amount', posting.amount,
    'balance_after', string.format('%d', posting_after[i]),
    'table_id', plan.table_id, 'hand_id', plan.hand_id,
    'tournament_id', pool and pool.tournament or '')
end
if pool and pool.action == 'enter' then
  local n = redis.call('HINCRBY', KEYS[7], 'entries', 1)
  redis.call('HSET', KEYS[7], entry_field, cjson.encode({
    n = n, player = pool.player, buy_in = pool.buy_in, fee = pool.fee, refunded = 0}))
  redis.call('HSETNX', KEYS[7], 'terms', pool.buy_in .. ':' .. pool.fee)
  redis.call('HINCRBY', KEYS[7], 'standing:' .. pool.player, 1)
elseif pool and pool.action == 'refund' then
  local entry = cjson.decode(redis.call('HGET', KEYS[7], entry_field))
  entry.refunded = 1
  redis.call('HSET', KEYS[7], entry_field, cjson.encode(entry))
  redis.call('HINCRBY', KEYS[7], 'standing:' .. pool.player, -1)
elseif pool and pool.action == 'prize' then
  local n = redis.call('HINCRBY', KEYS[7], 'prizes', 1)
  redis.call('HSET', KEYS[7], 'prize:' .. pool.ref, cjson.encode({
    n = n, player = pool.player, amount = pool.amount, place = pool.place}))
end
for _, rule in ipairs(plan.seats) do
  if rule.action == 'claim' then
    redis.call('HSET', KEYS[5], rule.seat, rule.player)
  elseif rule.action == 'release' then
    redis.call('HDEL', KEYS[5], rule.seat)
  end
end
if plan.hand_id ~= '' then
  redis.call('HSET', KEYS[6], plan.table_id, plan.hand_id)
end

local balances = {}
for _, account in ipairs(plan.report) do
  balances[account] = string.format('%d', after[account] or balance(account))
end
local outcome = cjson.encode({tx_id = tx_id, balances = balances, amount = plan.amount})
redis.call('HSET', KEYS[3], scope, cjson.encode({fingerprint = fingerprint, outcome = outcome}))
return {'ok', outcome, 0}
