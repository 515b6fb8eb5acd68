-- The lobby's pages of archived tournaments (the tournament service's ListTournaments,
-- docs/tournament.md, "Finished tournaments"): each page reads the archived tournaments
-- after its token's id, in the service's order (ids compared byte by byte, as Python compares
-- them: COLLATE "C", whatever the database's collation), LIMIT one page, so a page's cost
-- does not grow with the archive. One index for every phase, one for a phase's filter
-- (finished or cancelled). tournaments.archived is a view over tournaments.endings.
CREATE INDEX endings_lobby ON tournaments.endings ((tournament_id COLLATE "C"));
CREATE INDEX endings_lobby_by_outcome ON tournaments.endings (outcome, (tournament_id COLLATE "C"));
