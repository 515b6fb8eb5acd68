"""The archiver: moves what leaves each table's hot window from Redis to PostgreSQL,
verified, exactly once (docs/history.md)."""
