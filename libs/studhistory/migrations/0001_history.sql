-- The archive of record: tables' events and hands, the dealer's records (docs/history.md).
-- Roles mirror the Redis ACL users: the archiver writes (insert, select), support reads the
-- public history, the auditor also reads the dealer's records. Nobody updates or deletes an
-- archived row: no grant allows it and a trigger refuses it, for the owner too.

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'stud_archiver') THEN
        CREATE ROLE stud_archiver NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'stud_support') THEN
        CREATE ROLE stud_support NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'stud_auditor') THEN
        CREATE ROLE stud_auditor NOLOGIN;
    END IF;
END
$$;
GRANT stud_support TO stud_auditor;

CREATE SCHEMA history;
CREATE SCHEMA auditor;
REVOKE ALL ON SCHEMA history, auditor FROM PUBLIC;
GRANT USAGE ON SCHEMA history TO stud_archiver, stud_support;
GRANT USAGE ON SCHEMA auditor TO stud_archiver, stud_auditor;

-- Every event exactly as it was appended to the table's stream (bytes and SHA-256), keyed by
-- (table, sequence); partitioned by the month it happened.
CREATE TABLE history.events (
    table_id    text        NOT NULL,
    sequence    bigint      NOT NULL,
    hand        bigint      NOT NULL,
    type        text        NOT NULL,
    command_id  text        NOT NULL,
    occurred_at timestamptz NOT NULL,
    envelope    bytea       NOT NULL,
    digest      bytea       NOT NULL,
    archived_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (table_id, sequence, occurred_at)
) PARTITION BY RANGE (occurred_at);
CREATE INDEX events_by_hand ON history.events (table_id, hand);

-- One row per archived batch of a table's events: first..last, the digest of the last, and
-- the rules' state after it (the next batch's fold starts there). The archiver's watermark is
-- the greatest last_sequence; a batch's key makes its write happen once.
CREATE TABLE history.segments (
    table_id       text        NOT NULL,
    first_sequence bigint      NOT NULL,
    last_sequence  bigint      NOT NULL,
    last_digest    bytea       NOT NULL,
    hands          int         NOT NULL,
    state          text        NOT NULL,
    archived_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (table_id, first_sequence),
    UNIQUE (table_id, last_sequence),
    CHECK (first_sequence >= 1 AND last_sequence >= first_sequence)
);

-- One row per hand that ended: the read side of support's look-ups and the reports.
CREATE TABLE history.hands (
    table_id       text        NOT NULL,
    hand           bigint      NOT NULL,
    started_at     timestamptz,
    ended_at       timestamptz NOT NULL,
    first_sequence bigint      NOT NULL,
    last_sequence  bigint      NOT NULL,
    ante           bigint      NOT NULL,
    small_bet      bigint      NOT NULL,
    big_bet        bigint      NOT NULL,
    bring_in       bigint      NOT NULL,
    pot            bigint      NOT NULL,
    rake           bigint      NOT NULL,
    players        text[]      NOT NULL,
    seats          jsonb       NOT NULL,
    winners        jsonb       NOT NULL,
    nets           jsonb       NOT NULL,
    PRIMARY KEY (table_id, hand, ended_at)
) PARTITION BY RANGE (ended_at);
CREATE INDEX hands_by_time ON history.hands (ended_at);

-- A player's hands by time: one row per player dealt into a hand.
CREATE TABLE history.hand_players (
    player_id text        NOT NULL,
    ended_at  timestamptz NOT NULL,
    table_id  text        NOT NULL,
    hand      bigint      NOT NULL,
    seat      int         NOT NULL,
    net       bigint      NOT NULL,
    pot       bigint      NOT NULL,
    PRIMARY KEY (player_id, ended_at, table_id, hand)
) PARTITION BY RANGE (ended_at);

-- The dealer's record of each archived hand (its deck, salts, seeds and draws): auditors only.
CREATE TABLE auditor.dealer_hands (
    table_id    text        NOT NULL,
    hand        bigint      NOT NULL,
    record      bytea       NOT NULL,
    digest      bytea       NOT NULL,
    archived_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (table_id, hand)
);

-- Partitions: a DEFAULT one for each partitioned table (an insert never fails), and one per
-- month, made by history.ensure_month(ts) before the archiver writes rows of that month. It
-- runs with its owner's rights, so the archiver needs no right to create tables.
CREATE TABLE history.events_default PARTITION OF history.events DEFAULT;
CREATE TABLE history.hands_default PARTITION OF history.hands DEFAULT;
CREATE TABLE history.hand_players_default PARTITION OF history.hand_players DEFAULT;

CREATE FUNCTION history.ensure_month(ts timestamptz) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, history AS $$
DECLARE
    start_at timestamptz := date_trunc('month', ts AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
    end_at   timestamptz := start_at + interval '1 month';
    suffix   text := to_char(start_at AT TIME ZONE 'UTC', 'YYYY_MM');
    parent   text;
BEGIN
    FOREACH parent IN ARRAY ARRAY['events', 'hands', 'hand_players'] LOOP
        IF to_regclass(format('history.%I', parent || '_' || suffix)) IS NULL THEN
            -- Rows of that month already in the default partition would block the new one:
            -- the archiver calls this before it writes a month's first row.
            EXECUTE format('CREATE TABLE history.%I PARTITION OF history.%I '
                           'FOR VALUES FROM (%L) TO (%L)',
                           parent || '_' || suffix, parent, start_at, end_at);
        END IF;
    END LOOP;
END
$$;
REVOKE ALL ON FUNCTION history.ensure_month(timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION history.ensure_month(timestamptz) TO stud_archiver;

-- Append-only, by the database: no role is granted UPDATE, DELETE or TRUNCATE, and a trigger
-- refuses them for everyone, the owner included (who must drop the trigger to change a row).
CREATE FUNCTION history.refuse_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'archived rows are append-only: % on %.% refused',
        TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END
$$;

DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['history.events', 'history.segments', 'history.hands',
                             'history.hand_players', 'auditor.dealer_hands'] LOOP
        EXECUTE format('CREATE TRIGGER append_only BEFORE UPDATE OR DELETE ON %s '
                       'FOR EACH ROW EXECUTE FUNCTION history.refuse_change()', t);
        EXECUTE format('CREATE TRIGGER append_only_truncate BEFORE TRUNCATE ON %s '
                       'FOR EACH STATEMENT EXECUTE FUNCTION history.refuse_change()', t);
        EXECUTE format('REVOKE ALL ON %s FROM PUBLIC', t);
        EXECUTE format('GRANT SELECT, INSERT ON %s TO stud_archiver', t);
    END LOOP;
END
$$;

GRANT SELECT ON history.events, history.segments, history.hands, history.hand_players
    TO stud_support;
GRANT SELECT ON auditor.dealer_hands TO stud_auditor;
