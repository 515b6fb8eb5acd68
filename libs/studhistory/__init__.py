"""History beyond Redis: PostgreSQL as the archive of record (DESIGN §3a, docs/history.md)."""
