"""The wallet service: players' money, seat escrows and a double-entry ledger over Redis."""
