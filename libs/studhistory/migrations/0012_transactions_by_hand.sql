-- A settlement's table and hand on its ledger.transactions row (0011 kept only its time and
-- the players it saw). A hand that ends break-even (every seat wins back what it put in, no
-- rake: a hi/lo pot split between two who put in alike, a voided hand) is settled with no
-- posting, so once its ledger entry left Redis no ledger.postings row named its hand, and
-- stud replay verify (studtools.replay_source, which reads a table's archived settlements)
-- failed the hand: "the wallet has no settlement of hN". The archiver writes both columns
-- from the entry, its verify step compares them; a row copied before this migration has
-- '' in both. By table, as 0010 indexes ledger.postings (each partition's too).
ALTER TABLE ledger.transactions ADD COLUMN table_id text NOT NULL DEFAULT '',
                                ADD COLUMN hand_id  text NOT NULL DEFAULT '';
CREATE INDEX transactions_by_table ON ledger.transactions (table_id);
