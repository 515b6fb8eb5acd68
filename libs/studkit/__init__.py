"""Infrastructure shared by the services and tools: Redis keys and launcher, the event store,
auth tokens, logging and gRPC server plumbing. Never game rules (those live in ``rules``)."""
