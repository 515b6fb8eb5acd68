-- The login users of the archive of record (dev passwords: never use them in production; the
-- model for production's, docs/deploy.md "The archiver and PostgreSQL"). Each logs in and
-- holds one NOLOGIN role of the migrations, as studtools.pg_server.ROLE_USERS does for
-- `make run` and the tests:
--   archiver -> stud_archiver (the archiver: inserts and selects)
--   support  -> stud_support  (the table's GetHandHistory, support staff: the public history)
--   auditor  -> stud_auditor  (the public history and the dealer's records)
--   tournament -> stud_tournament_reader (the tournament service: archived tournaments'
--                 events and the lobby's view only, migration 0009)
--
-- The dev StatefulSet runs this once, on an empty data directory (the postgres image's
-- /docker-entrypoint-initdb.d), before the server takes connections, so the grants are there
-- before the archiver's init container migrates. It creates the four roles when missing,
-- exactly as migrations 0001 and 0009 do (IF NOT EXISTS on both sides), so neither order matters:
-- this before the migrations (dev) or after them (an operator's psql, prod). Rerunning it
-- resets the passwords and changes nothing else.
DO $$
DECLARE
    login record;
BEGIN
    FOR login IN SELECT * FROM (VALUES
            ('stud_archiver', 'archiver', 'dev-archiver-pg-pw'),
            ('stud_support', 'support', 'dev-support-pg-pw'),
            ('stud_auditor', 'auditor', 'dev-auditor-pg-pw'),
            ('stud_tournament_reader', 'tournament', 'dev-tournament-pg-pw'))
            AS l(role, name, password)
    LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = login.role) THEN
            EXECUTE format('CREATE ROLE %I NOLOGIN', login.role);
        END IF;
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = login.name) THEN
            EXECUTE format('CREATE ROLE %I LOGIN', login.name);
        END IF;
        EXECUTE format('ALTER ROLE %I LOGIN PASSWORD %L', login.name, login.password);
        EXECUTE format('GRANT %I TO %I', login.role, login.name);
    END LOOP;
END
$$;
