-- The wallet's postings and the tournaments' facts (docs/history.md), append-only like the
-- rest; and three holes of 0001 closed: TRUNCATE of one partition skipped the parent's
-- statement trigger, two ensure_month calls at once failed on the name the first took, and a
-- month whose rows had gone to DEFAULT made ensure_month fail.

CREATE SCHEMA ledger;
CREATE SCHEMA tournaments;
REVOKE ALL ON SCHEMA ledger, tournaments FROM PUBLIC;
GRANT USAGE ON SCHEMA ledger, tournaments TO stud_archiver, stud_support;

-- One row per posting of the wallet's ledger stream (stud:wallet:{wallet}:ledger), keyed by
-- the wallet's own ids: the stream entry's id (the transaction) and the posting's position in
-- it. occurred_at is the id's milliseconds, so a re-insert finds its row whatever the month.
CREATE TABLE ledger.postings (
    transaction_id text        NOT NULL,
    posting        int         NOT NULL,
    occurred_at    timestamptz NOT NULL,
    kind           text        NOT NULL,
    scope          text        NOT NULL,
    account        text        NOT NULL,
    amount         bigint      NOT NULL,
    table_id       text        NOT NULL DEFAULT '',
    hand_id        text        NOT NULL DEFAULT '',
    tournament_id  text        NOT NULL DEFAULT '',
    archived_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (transaction_id, posting, occurred_at),
    CHECK (transaction_id ~ '^[0-9]{1,19}-[0-9]{1,19}$' AND posting >= 0),
    CHECK (occurred_at = timestamptz 'epoch'
           + split_part(transaction_id, '-', 1)::bigint * interval '1 millisecond')
) PARTITION BY RANGE (occurred_at);
CREATE INDEX postings_by_account ON ledger.postings (account, occurred_at);
CREATE TABLE ledger.postings_default PARTITION OF ledger.postings DEFAULT;

-- One row per archived batch of the ledger stream, as history.segments is per table: the
-- archiver's watermark is the greatest (last_ms, last_seq).
CREATE TABLE ledger.segments (
    first_id     text        NOT NULL,
    last_id      text        NOT NULL,
    last_ms      bigint      NOT NULL,
    last_seq     bigint      NOT NULL,
    transactions int         NOT NULL,
    postings     int         NOT NULL,
    archived_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (first_id),
    UNIQUE (last_id),
    CHECK (last_id = last_ms || '-' || last_seq)
);
CREATE INDEX segments_by_end ON ledger.segments (last_ms, last_seq);

-- Every account's archived balance (the archived postings' sum; the wallet's Redis ledger
-- holds the rest).
CREATE VIEW ledger.balances AS
    SELECT account, sum(amount)::bigint AS balance FROM ledger.postings GROUP BY account;

-- Tournaments: facts, each written once when it happened (services/tournament/events.py).
CREATE TABLE tournaments.tournaments (
    tournament_id text        NOT NULL PRIMARY KEY,
    name          text        NOT NULL,
    format        text        NOT NULL,
    buy_in        bigint      NOT NULL,
    fee           bigint      NOT NULL,
    config        jsonb       NOT NULL,
    created_at    timestamptz NOT NULL,
    archived_at   timestamptz NOT NULL DEFAULT now()
);

-- A paid entry (EntryRequested then EntryPaid; a re-entry is an entry of its own).
CREATE TABLE tournaments.entries (
    tournament_id text        NOT NULL,
    entry_id      text        NOT NULL,
    player_id     text        NOT NULL,
    buy_in        bigint      NOT NULL,
    fee           bigint      NOT NULL,
    requested_at  timestamptz NOT NULL,
    archived_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tournament_id, entry_id)
);
CREATE INDEX entries_by_player ON tournaments.entries (player_id, requested_at);

-- Busted: out with no chips at the end of a hand (round: the busts that share a finish).
CREATE TABLE tournaments.busts (
    tournament_id text        NOT NULL,
    entry_id      text        NOT NULL,
    player_id     text        NOT NULL,
    table_id      text        NOT NULL,
    seat          int         NOT NULL,
    hand          bigint      NOT NULL,
    start_stack   bigint      NOT NULL,
    round         int         NOT NULL,
    busted_at     timestamptz NOT NULL,
    archived_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tournament_id, entry_id)
);

-- Final standings once a tournament is over: place..place_to (entries that busted together
-- share places).
CREATE TABLE tournaments.places (
    tournament_id text        NOT NULL,
    entry_id      text        NOT NULL,
    player_id     text        NOT NULL,
    place         int         NOT NULL,
    place_to      int         NOT NULL,
    archived_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tournament_id, entry_id),
    CHECK (place >= 1 AND place_to >= place)
);

-- Prizes paid (PrizeDue then PaymentMade); place 0: a share of a cancelled tournament's pool.
CREATE TABLE tournaments.prizes (
    tournament_id text        NOT NULL,
    payment_id    text        NOT NULL,
    entry_id      text        NOT NULL,
    player_id     text        NOT NULL,
    amount        bigint      NOT NULL,
    place         int         NOT NULL,
    place_to      int         NOT NULL,
    paid_at       timestamptz NOT NULL,
    archived_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tournament_id, payment_id),
    CHECK (amount > 0 AND place >= 0 AND place_to >= place)
);
CREATE INDEX prizes_by_player ON tournaments.prizes (player_id);

-- Refunds paid (RefundDue then PaymentMade): a withdrawn entry or a cancelled tournament's.
CREATE TABLE tournaments.refunds (
    tournament_id text        NOT NULL,
    payment_id    text        NOT NULL,
    entry_id      text        NOT NULL,
    player_id     text        NOT NULL,
    buy_in        bigint      NOT NULL,
    fee           bigint      NOT NULL,
    paid_at       timestamptz NOT NULL,
    archived_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tournament_id, payment_id)
);

-- How a tournament ended: finished (its winner) or cancelled (the reason).
CREATE TABLE tournaments.endings (
    tournament_id text        NOT NULL PRIMARY KEY,
    outcome       text        NOT NULL CHECK (outcome IN ('finished', 'cancelled')),
    reason        text        NOT NULL DEFAULT '',
    winner        text        NOT NULL DEFAULT '',
    ended_at      timestamptz NOT NULL,
    archived_at   timestamptz NOT NULL DEFAULT now()
);

-- Append-only, as in 0001: the triggers, no UPDATE/DELETE/TRUNCATE for any role; the
-- archiver inserts and reads, support (and so the auditor) reads.
DO $$
DECLARE
    t regclass;
BEGIN
    FOR t IN SELECT c.oid::regclass FROM pg_class c
             JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname IN ('ledger', 'tournaments') AND c.relkind IN ('r', 'p')
               AND NOT c.relispartition
    LOOP
        EXECUTE format('CREATE TRIGGER append_only BEFORE UPDATE OR DELETE ON %s '
                       'FOR EACH ROW EXECUTE FUNCTION history.refuse_change()', t);
        EXECUTE format('CREATE TRIGGER append_only_truncate BEFORE TRUNCATE ON %s '
                       'FOR EACH STATEMENT EXECUTE FUNCTION history.refuse_change()', t);
        EXECUTE format('REVOKE ALL ON %s FROM PUBLIC', t);
        EXECUTE format('GRANT SELECT, INSERT ON %s TO stud_archiver', t);
        EXECUTE format('GRANT SELECT ON %s TO stud_support', t);
    END LOOP;
END
$$;
REVOKE ALL ON ledger.balances FROM PUBLIC;
GRANT SELECT ON ledger.balances TO stud_archiver, stud_support;

-- A TRUNCATE of one partition does not fire its parent's statement trigger: each partition
-- gets its own (the row triggers are cloned to partitions by PostgreSQL itself).
CREATE FUNCTION history.guard_truncate(partition regclass) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = partition
                   AND tgname = 'append_only_truncate') THEN
        EXECUTE format('CREATE TRIGGER append_only_truncate BEFORE TRUNCATE ON %s '
                       'FOR EACH STATEMENT EXECUTE FUNCTION history.refuse_change()',
                       partition);
    END IF;
END
$$;
REVOKE ALL ON FUNCTION history.guard_truncate(regclass) FROM PUBLIC;

SELECT history.guard_truncate(i.inhrelid::regclass)
FROM pg_inherits i
JOIN pg_partitioned_table p ON p.partrelid = i.inhparent
JOIN pg_class c ON c.oid = i.inhparent
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname IN ('history', 'ledger', 'tournaments', 'auditor');

-- ensure_month(ts): the month's partition of every table partitioned by month in the
-- archive's schemas (history.events, hands, hand_players, ledger.postings, and any a later
-- migration adds), each with its TRUNCATE trigger. Cheap when they exist (the archiver may
-- call it before every write); when one is missing, an advisory lock makes concurrent callers
-- wait for the first and find its partitions. A month with rows already in its table's DEFAULT
-- partition keeps them there (a partition for them would fail): that table's month is left to
-- DEFAULT, with a NOTICE. Creating a partition locks its parent until the caller commits:
-- call it in a short transaction of its own, ahead of the month.
CREATE OR REPLACE FUNCTION history.ensure_month(ts timestamptz) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
DECLARE
    start_at timestamptz := date_trunc('month', ts AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
    end_at   timestamptz := start_at + interval '1 month';
    suffix   text := to_char(start_at AT TIME ZONE 'UTC', 'YYYY_MM');
    parent   record;
    locked   boolean := false;
    taken    boolean;
BEGIN
    FOR parent IN
        SELECT n.nspname AS nsp, c.relname AS rel, a.attname AS key, p.partdefid AS def
        FROM pg_partitioned_table p
        JOIN pg_class c ON c.oid = p.partrelid
        JOIN pg_namespace n ON n.oid = c.relnamespace
        JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = p.partattrs[0]
        WHERE n.nspname IN ('history', 'ledger', 'tournaments', 'auditor')
          AND p.partstrat = 'r' AND NOT c.relispartition
        ORDER BY 1, 2
    LOOP
        -- pg_class itself, not to_regclass: a statement's fresh snapshot sees a partition
        -- another caller committed while this one waited for the lock.
        CONTINUE WHEN EXISTS (SELECT 1 FROM pg_class k JOIN pg_namespace m
                              ON m.oid = k.relnamespace
                              WHERE m.nspname = parent.nsp
                                AND k.relname = parent.rel || '_' || suffix);
        IF NOT locked THEN
            PERFORM pg_advisory_xact_lock(6076336591457104206);  -- "ensure_month"
            locked := true;
            CONTINUE WHEN EXISTS (SELECT 1 FROM pg_class k JOIN pg_namespace m
                                  ON m.oid = k.relnamespace
                                  WHERE m.nspname = parent.nsp
                                    AND k.relname = parent.rel || '_' || suffix);
        END IF;
        IF parent.def <> 0 THEN
            EXECUTE format('SELECT EXISTS (SELECT 1 FROM %s WHERE %I >= $1 AND %I < $2)',
                           parent.def::regclass, parent.key, parent.key)
                INTO taken USING start_at, end_at;
            IF taken THEN
                RAISE NOTICE '%.% keeps % in its DEFAULT partition (rows of that month are '
                             'there already)', parent.nsp, parent.rel, suffix;
                CONTINUE;
            END IF;
        END IF;
        EXECUTE format('CREATE TABLE %I.%I PARTITION OF %I.%I FOR VALUES FROM (%L) TO (%L)',
                       parent.nsp, parent.rel || '_' || suffix, parent.nsp, parent.rel,
                       start_at, end_at);
        PERFORM history.guard_truncate(format('%I.%I', parent.nsp,
                                              parent.rel || '_' || suffix)::regclass);
    END LOOP;
END
$$;
