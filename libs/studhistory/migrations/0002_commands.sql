-- The tables' command records (the idempotency hash) once their events left Redis: the
-- outcome each command id was answered with, and the fingerprint of what was asked
-- (docs/history.md, "Command records").

CREATE TABLE history.commands (
    table_id    text        NOT NULL,
    command_id  text        NOT NULL,
    version     bigint      NOT NULL,
    outcome     text        NOT NULL,
    fingerprint text        NOT NULL DEFAULT '',
    archived_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (table_id, command_id)
);
CREATE TRIGGER append_only BEFORE UPDATE OR DELETE ON history.commands
    FOR EACH ROW EXECUTE FUNCTION history.refuse_change();
CREATE TRIGGER append_only_truncate BEFORE TRUNCATE ON history.commands
    FOR EACH STATEMENT EXECUTE FUNCTION history.refuse_change();
REVOKE ALL ON history.commands FROM PUBLIC;
GRANT SELECT, INSERT ON history.commands TO stud_archiver;
GRANT SELECT ON history.commands TO stud_support;
