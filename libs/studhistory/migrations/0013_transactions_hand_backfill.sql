-- A ledger.transactions row copied before 0012 (or by an archiver still running the code from
-- before it) has '' for its table and hand. For a settlement with no posting (a break-even or
-- voided hand) that row is the only record of its hand once its entry leaves Redis, so the
-- archiver's verify step never trims the entry of such a row (stud replay verify would fail
-- the hand: "the wallet has no settlement of hN"); it first fills the two columns from the
-- entry still in Redis, then reads the row back and compares it whole.
--
-- ledger.transactions stays append-only but for that one change: its row trigger lets an
-- UPDATE through only when the row's table and hand were both '', at least one is set now,
-- and nothing else changes; anything else is refused as before (for the owner too). The
-- archiver is granted UPDATE of those two columns only (no table-wide UPDATE, DELETE or
-- TRUNCATE for any role).
CREATE FUNCTION ledger.refuse_change_but_hand_backfill() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.table_id = '' AND OLD.hand_id = ''
            AND (NEW.table_id <> '' OR NEW.hand_id <> '')
            AND (NEW.transaction_id, NEW.occurred_at, NEW.kind, NEW.postings, NEW.at_ms,
                 NEW.seen, NEW.archived_at)
                IS NOT DISTINCT FROM (OLD.transaction_id, OLD.occurred_at, OLD.kind,
                                      OLD.postings, OLD.at_ms, OLD.seen, OLD.archived_at) THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'archived rows are append-only: % on %.% refused',
        TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END
$$;
REVOKE ALL ON FUNCTION ledger.refuse_change_but_hand_backfill() FROM PUBLIC;

DROP TRIGGER append_only ON ledger.transactions;  -- and its clones on the partitions
CREATE TRIGGER append_only BEFORE UPDATE OR DELETE ON ledger.transactions
    FOR EACH ROW EXECUTE FUNCTION ledger.refuse_change_but_hand_backfill();
GRANT UPDATE (table_id, hand_id) ON ledger.transactions TO stud_archiver;
