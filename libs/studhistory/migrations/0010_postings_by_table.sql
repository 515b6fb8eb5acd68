-- The wallet's settlements of a table (stud replay verify: studtools.replay_source reads the
-- archived settlements of the tables it checks, kind = 'settlement' AND table_id = ANY(...)):
-- by table, where each read scanned every archived posting of every month. An index on the
-- partitioned table, as 0003 and 0005 index it: PostgreSQL makes one on each partition,
-- those there now and each month ensure_month makes later.
CREATE INDEX postings_by_table ON ledger.postings (table_id);
