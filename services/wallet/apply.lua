-- Apply one wallet transaction atomically (services/wallet/store.py builds the arguments).
--
-- KEYS[1] ledger stream          KEYS[2] balances hash (account -> int)
-- KEYS[3] idempotency hash       KEYS[4] player accounts hash (player id -> created ms)
-- KEYS[5] seat holders of the transaction's table (seat -> player id)
-- KEYS[6] last settled hand per table (table id -> hand id)
-- KEYS[7] the record of the transaction's tournament pool (a hash: 'entry:<id>' -> JSON,
--         'prize:<key>' -> JSON, 'terms' -> '<buy_in>:<fee>', 'standing:<player>' -> count,
--         'entries' and 'prizes' -> counts); a placeholder never written when it has none
-- KEYS[8] players' protection (player id -> JSON of limits and exclusion, protection.codec)
-- KEYS[9] the usage list of the transaction's player ('<at_ms>:<deposit>:<wager>:<loss>',
--         newest first); a placeholder never written when the transaction has no rule
-- KEYS[10] players' sessions (player id -> '<started_ms>:<last_ms>', protection.Session): a
--          projection of the ledger (protection.sessions.replay_sessions), written here only
-- KEYS[10 + i] the statement stream of the account of posting i
-- ARGV[1] idempotency scope      ARGV[2] fingerprint of the command
-- ARGV[3] plan (JSON; amounts are decimal strings)
-- ARGV[4] ledger record (JSON, stored verbatim)
-- ARGV[5] protection rule (JSON: player, now, checks, blocked, usage, and a buy-in's
--         session_gap_ms) or ''
-- ARGV[6] a settlement's report (JSON: now, players, table, session_gap_ms) or '': which of
--         its players are excluded or past their session time limit (issue 34), for the table
--         to stand up after the hand, and every seat held at the table with its escrow after
--         it (what Reconcile reads), read here rather than in round trips of their own (issue
--         35); each player's session goes on, or starts, at its now (seen), with the money
--
-- Order: a scope already applied returns its stored outcome (or a mismatch) before anything
-- else, so a retry answers the original outcome even when balances have moved since. Then
-- every check runs before the first write, so a refusal changes nothing.
-- Returns {'ok', outcome_json, replayed, excluded, timed_out, held, reasons} (excluded: those of
-- ARGV[6]'s players excluded at its now, on a retry too; timed_out: the others whose session,
-- seen at its now, has lasted the session time limit in force; held: seat, player, escrow of
-- each seat held at ARGV[6]'s table after the transaction, flat, on a retry too; reasons: the
-- refusal reason of each of excluded, in its order) or {'error', reason, detail}.

local MAX = 9007199254740991

-- An exclusion in force at now: the rule of protection.Exclusion.active (and of the check
-- below).
local function in_force(e, now)
  local lift, untl = tonumber(e.lift_ms), tonumber(e.until_ms)
  return not (lift > 0 and now >= lift) and (untl == 0 or now < untl)
end

-- The session time limit in minutes in force at now (protection.codec.session_limit_in).
local function session_minutes(state, now)
  local s = state and state.session_limit
  if not s then return 0 end
  local minutes = tonumber(s.amount)
  if s.pending ~= '' and now >= tonumber(s.effective_ms) then
    minutes = tonumber(s.pending)
  end
  return minutes
end

-- The player's session after a buy-in or a settled hand at now (protection.seen), and the
-- session before it when it goes on (nil: a new one starts).
local function session_seen(player, now, gap)
  local text = redis.call('HGET', KEYS[10], player)
  if text then
    local a, b = string.match(text, '^(%d+):(%d+)$')
    local started, last = tonumber(a), tonumber(b)
    if now - last < gap then
      return started, math.max(last, now), true
    end
  end
  return now, now, false
end

local excluded, timed_out, reasons, sessions = {}, {}, {}, {}
local ask = ARGV[6] and ARGV[6] ~= '' and cjson.decode(ARGV[6]) or nil
if ask then
  local now = tonumber(ask.now)
  for _, player in ipairs(ask.players) do
    local raw = redis.call('HGET', KEYS[8], player)
    local state = raw and cjson.decode(raw) or nil
    local started, last = session_seen(player, now, tonumber(ask.session_gap_ms))
    sessions[#sessions + 1] = {player, string.format('%d:%d', started, last)}
    local minutes = session_minutes(state, now)
    if state and state.exclusion and in_force(state.exclusion, now) then
      excluded[#excluded + 1] = player
      reasons[#reasons + 1] = state.exclusion.reason
    elseif minutes > 0 and now >= started + minutes * 60000 then
      timed_out[#timed_out + 1] = player
    end
  end
end

-- The seats held at ARGV[6]'s table and their escrows, as Reconcile reads them.
local function held()
  local out = {}
  if not ask or not ask.table then return out end
  local holders = redis.call('HGETALL', KEYS[5])
  for i = 1, #holders, 2 do
    out[#out + 1] = holders[i]
    out[#out + 1] = holders[i + 1]
    out[#out + 1] = redis.call('HGET', KEYS[2], 'seat:' .. ask.table .. ':' .. holders[i]) or '0'
  end
  return out
end

local scope, fingerprint = ARGV[1], ARGV[2]
local seen = redis.call('HGET', KEYS[3], scope)
if seen then
  local record = cjson.decode(seen)
  if record.fingerprint ~= fingerprint then
    return {'error', 'idempotency_key_reused', scope}
  end
  return {'ok', record.outcome, 1, excluded, timed_out, held(), reasons}
end

local plan = cjson.decode(ARGV[3])

-- A table's settlement records are kept for its latest SETTLED_KEPT hands (issue 31: the
-- wallet's keys stay flat); 'expired:<table>' is the hand through which they were dropped. A
-- settlement of such a hand without its record is a retry from beyond the window: refused,
-- never applied twice (the table settles its hands in order, each before the next starts).
local SETTLED_KEPT = 100
local settled_n = plan.kind == 'settlement' and tonumber(string.match(plan.hand_id, '^h(%d+)$'))
local expired_field = 'expired:' .. plan.table_id
if settled_n and settled_n <= tonumber(redis.call('HGET', KEYS[3], expired_field) or '-1') then
  return {'error', 'settlement_expired', plan.table_id .. ' ' .. plan.hand_id}
end

for _, player in ipairs(plan.players) do
  if redis.call('HEXISTS', KEYS[4], player) == 0 then
    return {'error', 'unknown_account', 'player:' .. player}
  end
end

-- Player protection (issue 34): an active exclusion, then every limit in force of the
-- kinds the move counts against, over its rolling window; the least left wins. Same rule as
-- protection.check.
local protect = ARGV[5] ~= '' and cjson.decode(ARGV[5]) or nil
local usage_entry, session_after
if protect then
  local now = tonumber(protect.now)
  local raw = redis.call('HGET', KEYS[8], protect.player)
  local state = raw and cjson.decode(raw) or nil
  local usage = nil
  -- A buy-in (a sit-down or top-up): refused once the player's running session has lasted
  -- the session limit in force (session_ends_at); the session goes on, or starts (seen).
  if protect.session_gap_ms then
    local started, last, goes_on = session_seen(protect.player, now,
      tonumber(protect.session_gap_ms))
    local minutes = session_minutes(state, now)
    local ends = started + minutes * 60000
    if goes_on and minutes > 0 and now >= ends then
      return {'error', 'session_limit', string.format('%d:%d', started, ends)}
    end
    session_after = string.format('%d:%d', started, last)
  end
  if state and protect.blocked and state.exclusion then
    local e = state.exclusion
    if in_force(e, now) then
      return {'error', e.reason, e.until_ms}
    end
  end
  if state and #protect.checks > 0 then
    local worst = nil
    for _, kind in ipairs(protect.checks) do
      for _, window in ipairs({{'day', 86400000}, {'week', 604800000}, {'month', 2592000000}}) do
        local limit = state.limits[kind .. ':' .. window[1]]
        if limit then
          local amount = tonumber(limit.amount)
          if limit.pending ~= '' and now >= tonumber(limit.effective_ms) then
            amount = tonumber(limit.pending)
            if amount == 0 then amount = nil end
          end
          if amount then
            if usage == nil then usage = redis.call('LRANGE', KEYS[9], 0, -1) end
            local start, total, oldest = now - window[2], 0, nil
            local field = ({deposit = 2, wager = 3, loss = 4})[kind]
            for _, text in ipairs(usage) do
              local parts = {}
              for part in string.gmatch(text, '[^:]+') do parts[#parts + 1] = tonumber(part) end
              -- A move stamped after now (applied first, its clock read later) counts too.
              if parts[1] > start then
                total = total + parts[field]
                if parts[field] > 0 and (oldest == nil or parts[1] < oldest) then
                  oldest = parts[1]
                end
              end
            end
            if total < 0 then total = 0 end
            local remaining = amount - total
            if remaining < 0 then remaining = 0 end
            if total + tonumber(protect.usage[field - 1]) > amount
                and (worst == nil or remaining < worst[3]) then
              worst = {kind, window[1], remaining, amount,
                       oldest and (oldest + window[2]) or now}
            end
          end
        end
      end
    end
    if worst then
      return {'error', worst[1] .. '_limit', string.format('%s:%d:%d:%d', worst[2], worst[4],
        worst[3], worst[5])}
    end
  end
  usage_entry = string.format('%d:%s:%s:%s', now, protect.usage[1], protect.usage[2],
    protect.usage[3])
end

for _, rule in ipairs(plan.seats) do
  local holder = redis.call('HGET', KEYS[5], rule.seat)
  if rule.action == 'claim' then
    if holder and holder ~= rule.player then
      return {'error', 'seat_taken', 'seat ' .. rule.seat .. ' is held for another player'}
    end
  elseif rule.action == 'claim_free' then
    -- A sit-down's buy-in: never added to an escrow already there, the player's own either
    -- (an orphan a table's crash left, its refund to come). Checked after the replay above.
    if holder then
      return {'error', 'seat_taken', 'seat ' .. rule.seat .. ' is held for ' ..
        (holder == rule.player and 'this player already' or 'another player')}
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
  redis.call('XADD', KEYS[10 + i], '*',
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
  if rule.action == 'claim' or rule.action == 'claim_free' then
    redis.call('HSET', KEYS[5], rule.seat, rule.player)
  elseif rule.action == 'release' then
    redis.call('HDEL', KEYS[5], rule.seat)
  end
end
if plan.hand_id ~= '' then
  redis.call('HSET', KEYS[6], plan.table_id, plan.hand_id)
end
if usage_entry then
  redis.call('LPUSH', KEYS[9], usage_entry)
  local old = tonumber(protect.now) - tonumber(protect.kept_ms)
  while true do
    local last = redis.call('LINDEX', KEYS[9], -1)
    if not last or tonumber(string.match(last, '^[^:]+')) > old then break end
    redis.call('RPOP', KEYS[9])
  end
end
if session_after then
  redis.call('HSET', KEYS[10], protect.player, session_after)
end
for _, session in ipairs(sessions) do
  redis.call('HSET', KEYS[10], session[1], session[2])
end

local balances = {}
for _, account in ipairs(plan.report) do
  balances[account] = string.format('%d', after[account] or balance(account))
end
local outcome = cjson.encode({tx_id = tx_id, balances = balances, amount = plan.amount})
redis.call('HSET', KEYS[3], scope, cjson.encode({fingerprint = fingerprint, outcome = outcome}))
if settled_n and settled_n > SETTLED_KEPT then
  local old = settled_n - SETTLED_KEPT
  local through = tonumber(redis.call('HGET', KEYS[3], expired_field) or '0')
  if old > through then
    -- Normally one record; at most 64 (records from before the window existed stay).
    for n = math.max(through + 1, old - 63), old do
      redis.call('HDEL', KEYS[3], 'settle:' .. plan.table_id .. ':h' .. n)
    end
    redis.call('HSET', KEYS[3], expired_field, string.format('%d', old))
  end
end
return {'ok', outcome, 0, excluded, timed_out, held(), reasons}
