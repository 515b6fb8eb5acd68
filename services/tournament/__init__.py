"""The tournament service (DESIGN §5c): sit & go and multi-table stud/8 tournaments, each
event-sourced on its own stream; the pure model is ``structure``, ``payouts``, ``seating``,
``events``, ``state`` and ``decide``."""
