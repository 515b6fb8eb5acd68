-- Tournament fees and prizes for operators (docs/history.md, "Reports"; `stud report
-- tournaments`): one row per archived tournament (the archiver writes a tournament's facts
-- once it is over and paid out), on the UTC day it ended. What the house kept is the fees of
-- the entries less the fees it refunded; what the players got back is the prizes and the
-- refunded buy-ins. Support (and so the auditor) reads it; nobody writes it.
CREATE VIEW tournaments.results AS
SELECT t.tournament_id,
       t.name,
       t.format,
       (e.ended_at AT TIME ZONE 'UTC')::date AS day,
       e.outcome,
       coalesce(en.entries, 0)::bigint AS entries,
       coalesce(en.buy_ins, 0)::bigint AS buy_ins,
       coalesce(en.fees, 0)::bigint AS fees,
       coalesce(rf.buy_ins, 0)::bigint AS refunded_buy_ins,
       coalesce(rf.fees, 0)::bigint AS refunded_fees,
       coalesce(pz.prizes, 0)::bigint AS prizes
FROM tournaments.endings e
JOIN tournaments.tournaments t USING (tournament_id)
LEFT JOIN (SELECT tournament_id, count(*) AS entries, sum(buy_in) AS buy_ins,
                  sum(fee) AS fees
           FROM tournaments.entries GROUP BY 1) en USING (tournament_id)
LEFT JOIN (SELECT tournament_id, sum(buy_in) AS buy_ins, sum(fee) AS fees
           FROM tournaments.refunds GROUP BY 1) rf USING (tournament_id)
LEFT JOIN (SELECT tournament_id, sum(amount) AS prizes
           FROM tournaments.prizes GROUP BY 1) pz USING (tournament_id);

CREATE INDEX endings_by_day ON tournaments.endings (((ended_at AT TIME ZONE 'UTC')::date));

REVOKE ALL ON tournaments.results FROM PUBLIC;
GRANT SELECT ON tournaments.results TO stud_support;
