-- The players' sessions leave Redis with the wallet's ledger (docs/player-protection.md,
-- "Sessions"): the sessions hash (stud:wallet:{wallet}:sessions) is a projection of the
-- ledger's buy-ins and settlements, each of which records the wallet's time and the players
-- it saw (its entry's at_ms and seen). Posting 0 of each archived transaction keeps them:
-- at_ms, the wallet's clock when it was applied, and seen, the JSON array of those players
-- ('' when it saw nobody). Rows copied before this migration hold 0 and '': their sessions
-- cannot be rebuilt. The operator's `stud wallet rebuild-sessions` folds these rows, then the
-- ledger still in Redis (WalletStore.rebuild_sessions).
ALTER TABLE ledger.postings
    ADD COLUMN at_ms bigint NOT NULL DEFAULT 0,
    ADD COLUMN seen  text   NOT NULL DEFAULT '';
