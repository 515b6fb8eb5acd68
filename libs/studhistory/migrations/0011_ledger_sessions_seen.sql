-- The players' sessions leave Redis with the wallet's ledger (docs/player-protection.md,
-- "Sessions"): the sessions hash (stud:wallet:{wallet}:sessions) is a projection of the
-- ledger's buy-ins and settlements, each of which records the wallet's time and the players
-- it saw (its entry's at_ms and seen). A transaction may have no postings (a voided hand's
-- settlement, a break-even one with no rake) and still see players, so they are kept one row
-- per archived transaction, not on its postings: ledger.transactions, written by the
-- archiver in the same PostgreSQL transaction as its postings and segment, compared with
-- Redis by its verify step. The operator's `python -m wallet.rebuild_sessions --history-dsn
-- ...` folds these rows, then the ledger still in Redis (WalletStore.rebuild_sessions).
--
-- A segment copied before this migration has no rows here (ledger.segments.sessions false):
-- its transactions' sessions were not kept, and the rebuild refuses a range holding one
-- (archive_predates_sessions) rather than fold less than the live hash saw.

-- One row per transaction of the wallet's ledger stream, keyed by its entry id; occurred_at
-- is the id's milliseconds (as ledger.postings'), at_ms the wallet's clock when it applied
-- it, seen the players whose sessions it saw (empty: none).
CREATE TABLE ledger.transactions (
    transaction_id text        NOT NULL,
    occurred_at    timestamptz NOT NULL,
    kind           text        NOT NULL,
    postings       int         NOT NULL,
    at_ms          bigint      NOT NULL,
    seen           text[]      NOT NULL DEFAULT '{}',
    archived_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (transaction_id, occurred_at),
    CHECK (transaction_id ~ '^[0-9]{1,19}-[0-9]{1,19}$' AND postings >= 0 AND at_ms > 0
           AND array_position(seen, NULL) IS NULL),
    CHECK (occurred_at = timestamptz 'epoch'
           + split_part(transaction_id, '-', 1)::bigint * interval '1 millisecond')
) PARTITION BY RANGE (occurred_at);
CREATE TABLE ledger.transactions_default PARTITION OF ledger.transactions DEFAULT;

-- Append-only, as 0003 made ledger.postings: the triggers, no UPDATE/DELETE/TRUNCATE for any
-- role; the archiver inserts and reads, support (and so the wallet's rebuild) reads. The
-- months are history.ensure_month's, as every table partitioned by month in ledger.
CREATE TRIGGER append_only BEFORE UPDATE OR DELETE ON ledger.transactions
    FOR EACH ROW EXECUTE FUNCTION history.refuse_change();
CREATE TRIGGER append_only_truncate BEFORE TRUNCATE ON ledger.transactions
    FOR EACH STATEMENT EXECUTE FUNCTION history.refuse_change();
SELECT history.guard_truncate('ledger.transactions_default'::regclass);
REVOKE ALL ON ledger.transactions FROM PUBLIC;
GRANT SELECT, INSERT ON ledger.transactions TO stud_archiver;
GRANT SELECT ON ledger.transactions TO stud_support;

-- Which segments wrote their transactions' rows: true from this migration on (the archiver
-- writes it), false for the segments copied before it.
ALTER TABLE ledger.segments ADD COLUMN sessions boolean NOT NULL DEFAULT false;
