-- Operator reports (docs/history.md, "Reports"; `stud report`): views over the archived
-- hands, by UTC day. Support (and so the auditor) reads them; nobody writes them. A stake is
-- the hand's (small_bet, big_bet). Only archived hands count: the archiver copies each hand
-- seconds after it settles.

-- The day a hand ended, in UTC, indexed so that a report of a few days reads those days
-- only (the expression is immutable; PostgreSQL builds it on every partition, present and
-- future).
CREATE INDEX hands_by_day ON history.hands (((ended_at AT TIME ZONE 'UTC')::date));

-- Each hand is one row with each of its players (WITH ORDINALITY: i = 1 is the hand's first
-- player, or NULL for a hand without players), so that one pass counts distinct players and
-- sums each hand's pot and rake once.

-- Per UTC day, stake and table: hands, rake, distinct players, the pots' total.
CREATE VIEW history.daily_tables AS
SELECT (h.ended_at AT TIME ZONE 'UTC')::date AS day,
       h.small_bet,
       h.big_bet,
       h.table_id,
       count(*) FILTER (WHERE coalesce(u.i, 1) = 1)::bigint AS hands,
       sum(h.rake) FILTER (WHERE coalesce(u.i, 1) = 1)::bigint AS rake,
       count(DISTINCT u.player_id)::bigint AS players,
       sum(h.pot) FILTER (WHERE coalesce(u.i, 1) = 1)::bigint AS pot
FROM history.hands h
LEFT JOIN LATERAL unnest(h.players) WITH ORDINALITY AS u(player_id, i) ON true
GROUP BY 1, 2, 3, 4;

-- Per UTC day and stake: hands, rake, distinct players, distinct tables, the pots' total.
CREATE VIEW history.daily_stakes AS
SELECT (h.ended_at AT TIME ZONE 'UTC')::date AS day,
       h.small_bet,
       h.big_bet,
       count(*) FILTER (WHERE coalesce(u.i, 1) = 1)::bigint AS hands,
       sum(h.rake) FILTER (WHERE coalesce(u.i, 1) = 1)::bigint AS rake,
       count(DISTINCT u.player_id)::bigint AS players,
       count(DISTINCT h.table_id)::bigint AS tables,
       sum(h.pot) FILTER (WHERE coalesce(u.i, 1) = 1)::bigint AS pot
FROM history.hands h
LEFT JOIN LATERAL unnest(h.players) WITH ORDINALITY AS u(player_id, i) ON true
GROUP BY 1, 2, 3;

-- Per player and UTC day: the hands they were dealt into and their net (what they won less
-- what they put in, rake taken), from history.hand_players (found by its primary key).
CREATE VIEW history.player_daily AS
SELECT hp.player_id,
       (hp.ended_at AT TIME ZONE 'UTC')::date AS day,
       count(*)::bigint AS hands,
       sum(hp.net)::bigint AS net
FROM history.hand_players hp
GROUP BY 1, 2;

REVOKE ALL ON history.daily_tables, history.daily_stakes, history.player_daily FROM PUBLIC;
GRANT SELECT ON history.daily_tables, history.daily_stakes, history.player_daily
    TO stud_support;
