-- The wallet's statements leave Redis with its ledger (docs/history.md, "The wallet's
-- ledger"): each posting's row also keeps its line of the account's statement stream
-- (stud:wallet:{wallet}:postings:<account>): the line's stream id, which is the statement's
-- page token, split into its two numbers so that an account's lines sort as the stream does,
-- and the account's balance right after the posting. GetStatement reads an account's archived
-- lines by postings_by_line, then the lines still in Redis.
ALTER TABLE ledger.postings
    ADD COLUMN line_id       text   NOT NULL DEFAULT '',
    ADD COLUMN line_ms       bigint NOT NULL DEFAULT 0,
    ADD COLUMN line_seq      bigint NOT NULL DEFAULT 0,
    ADD COLUMN balance_after bigint NOT NULL DEFAULT 0,
    ADD CONSTRAINT postings_line_id CHECK (line_id = '' OR line_id = line_ms || '-' || line_seq);
CREATE INDEX postings_by_line ON ledger.postings (account, line_ms, line_seq);
