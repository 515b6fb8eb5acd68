-- The tournament service's own role (docs/tournament.md, "Finished tournaments"): it reads
-- an archived tournament's events (GetTournament, VerifyTournament, WatchTournament, the
-- command_expired check) and the lobby's view of the archived tournaments, and nothing else:
-- not the tables' history, the command outcomes, the ledger, the dealer's records nor the
-- other tournament facts, which stud_support reads. The view reads tournaments.endings and
-- tournaments.events with its owner's rights, so no grant on endings is needed. It writes
-- nothing: no grant allows it (and the trigger of 0007 refuses any change anyway).
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'stud_tournament_reader') THEN
        CREATE ROLE stud_tournament_reader NOLOGIN;
    END IF;
END
$$;
GRANT USAGE ON SCHEMA tournaments TO stud_tournament_reader;
GRANT SELECT ON tournaments.events, tournaments.archived TO stud_tournament_reader;
