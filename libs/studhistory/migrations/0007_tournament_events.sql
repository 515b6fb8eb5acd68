-- A tournament's stream in PostgreSQL (docs/history.md, "Tournaments"): once a tournament is
-- over and paid out, the archiver copies every event of its stream (stud:tournament:{id}:
-- events) exactly as stored, verifies the copy against a fresh read of Redis, and only then
-- removes the tournament's keys from Redis. The tournament service (TOURNAMENT_HISTORY_DSN,
-- the support role) and `stud replay tournament` read it here from then on. Not partitioned:
-- a tournament's stream is a few hundred events (levels, entries, moves, busts, payments:
-- its hands are the tables'), written once when it ends.
CREATE TABLE tournaments.events (
    tournament_id text        NOT NULL,
    sequence      bigint      NOT NULL,
    occurred_at   timestamptz NOT NULL,
    event_type    text        NOT NULL,
    command_id    text        NOT NULL,
    envelope      bytea       NOT NULL,
    digest        bytea       NOT NULL,
    archived_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tournament_id, sequence),
    CHECK (sequence >= 1 AND octet_length(digest) = 32)
);

CREATE TRIGGER append_only BEFORE UPDATE OR DELETE ON tournaments.events
    FOR EACH ROW EXECUTE FUNCTION history.refuse_change();
CREATE TRIGGER append_only_truncate BEFORE TRUNCATE ON tournaments.events
    FOR EACH STATEMENT EXECUTE FUNCTION history.refuse_change();
REVOKE ALL ON tournaments.events FROM PUBLIC;
GRANT SELECT, INSERT ON tournaments.events TO stud_archiver;
GRANT SELECT ON tournaments.events TO stud_support;

-- The tournaments whose stream is archived, with how they ended: what the tournament
-- service lists in its lobby once their keys left Redis (one probe of the primary key per
-- ending, no aggregate over the events).
CREATE VIEW tournaments.archived AS
SELECT e.tournament_id, e.outcome
FROM tournaments.endings e
WHERE EXISTS (SELECT 1 FROM tournaments.events v WHERE v.tournament_id = e.tournament_id);
REVOKE ALL ON tournaments.archived FROM PUBLIC;
GRANT SELECT ON tournaments.archived TO stud_archiver, stud_support;
