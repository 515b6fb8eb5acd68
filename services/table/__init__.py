"""The table service: the authority on each table. It turns client commands into events with
the rules library, appends them to the table's stream, drives each hand (the dealer for cards,
the wallet for money, the action clock) and streams each viewer what they may see."""
