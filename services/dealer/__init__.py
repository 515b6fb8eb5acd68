"""The dealer service: shuffled decks, commitments, dealing, hole-card secrecy, reveals."""
