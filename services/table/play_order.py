"""Where a ``Play`` stream's replies go among its records (issue 35): :class:`ReplyOrder`.

One rule: an applied action's reply goes out where its records would have been, after every
record written before them, whether the watch has delivered those yet or not (a client
folding by sequence would drop a record that came after a reply past it), a retry's reply
too (its records may still be to come on this stream: a resumed one); a refusal after the
records it releases; and every reply after the replies still waiting (in the order of their
actions). And one consequence: the stream's own applied actions' records come in their
replies only, never again as records.

The order is pure bookkeeping: batches of the watch (:meth:`ReplyOrder.batch`) and the
actions' outcomes (:meth:`ReplyOrder.started`, :meth:`ReplyOrder.answered`) in, the messages
to write out, in order. It never waits and never writes; the records' bytes are made by the
``render`` it is given (the Play handler's: the watchers' shared record bytes).
"""

from __future__ import annotations

from collections.abc import Callable

from stud.v1.envelope_pb2 import EventEnvelope

Render = Callable[[list[EventEnvelope]], list[bytes]]
"""The messages of a (non-empty) run of a batch's records, none of them left out."""


class ReplyOrder:
    """One Play stream's records and replies, put in the order they are written.

    ``live_from`` is the table's version when the watch began (records after it may be the
    stream's own); ``every_own`` the prefix of the caller's stored command ids when
    ``skip_own`` was asked for (their records are left out too)."""

    def __init__(self, live_from: int, every_own: str | None, render: Render,
                 after: int | None = None) -> None:
        self.live_from = live_from
        self.through = live_from if after is None else after
        """The last sequence the watch has delivered (written or left out)."""
        self.every_own = every_own
        self._render = render
        self.mine: dict[str, int] = {}
        """The stored command ids of the stream's actions whose records may still come by
        the watch: 0 while in flight, then, once applied, the version after them (forgotten
        once the watch is past it); a refused one is forgotten at its reply."""
        self.held: list[list[EventEnvelope]] = []
        """Batches the watch delivered from the first one holding a record of an action in
        flight on: whether that record is the stream's own is known at the action's reply
        (applied: it is in the reply; refused: another command with the same id, or an
        append whose outcome was lost, wrote it, and it comes as a record), and the rest
        wait behind it, in order."""
        self.pending: dict[str, tuple[list[bytes], int]] = {}
        """The replies of actions applied (a retry's too), each waiting for its place among
        the records (by stored command id: the reply's bytes, with those of the replies
        answered meanwhile that go right after it, and the version after it)."""

    @property
    def waiting(self) -> bool:
        """Whether an applied action's reply waits for its place among the records (it
        goes out with the watch's next batches, or at :meth:`drain`)."""
        return bool(self.pending)

    # --- in --------------------------------------------------------------------------------

    def started(self, cid: str) -> None:
        """An action with stored command id ``cid`` is in flight (its records, should the
        watch bring them first, wait for its outcome)."""
        self.mine.setdefault(cid, 0)

    def batch(self, batch: list[EventEnvelope]) -> list[bytes]:
        """A batch of the watch's: the messages to write now (none while it is held)."""
        if self.held or self._held_back(batch):
            self.held.append(batch)
            return []
        return self._emit(batch)

    def answered(self, data: bytes, cid: str, version: int | None, fresh: bool
                 ) -> list[bytes]:
        """An action's reply (``data``; ``cid`` its stored command id, "" when it was refused
        before it had one; ``version`` the version after it, None: refused; ``fresh``:
        applied now, not a retry's recorded outcome), and the held records its outcome
        releases: the messages to write now. An applied action's reply (a retry's too: its
        records may not have come on this stream yet) waits for its place if the watch has
        not delivered the version after it, a retry's right after the reply it repeats if
        that still waits on this stream; any other reply (a refusal, a retry whose records
        came) goes after the records it releases and after the replies still waiting (the
        replies keep the order of their actions)."""
        if version is None:
            if cid and self.mine.get(cid) == 0:
                del self.mine[cid]
        elif cid:
            self.mine[cid] = max(version, 1)
            if cid in self.pending:
                self.pending[cid][0].append(data)  # after the reply it repeats
                return self._released()
            if fresh or version > self.through:  # its records have not come on this stream
                self.pending[cid] = ([data], version)
                return self._released()
        released = self._released()
        if self.pending:
            last = max(self.pending.values(), key=lambda waiting: waiting[1])
            last[0].append(data)  # behind the reply that goes last
            return released
        return [*released, data]

    def drain(self) -> list[bytes]:
        """The stream's end, no action in flight any more (one that never answered is not
        the stream's): the records still held, each reply still waiting for its place in
        them, and last the replies whose records never came."""
        for cid in [c for c, v in self.mine.items() if v == 0]:
            del self.mine[cid]
        held, self.held = self.held, []
        out: list[bytes] = []
        for batch in held:
            out += self._emit(batch)
        waiting = sorted(self.pending.values(), key=lambda replies: replies[1])
        self.pending = {}
        return out + [data for replies, _version in waiting for data in replies]

    # --- the rule --------------------------------------------------------------------------

    def _shown(self, batch: list[EventEnvelope]) -> list[bytes]:
        """The messages of a run of a batch: the stream's own records left out."""
        if self.mine or self.every_own is not None:
            last = batch[-1].sequence
            batch = [e for e in batch if not self._own(e)]
            for cid in [c for c, v in self.mine.items() if 0 < v <= last]:
                del self.mine[cid]
            if not batch:
                return []
        return self._render(batch)

    def _emit(self, batch: list[EventEnvelope]) -> list[bytes]:
        """The messages of one batch, with each reply waiting for its place put before the
        first record of its action (or before the first record past the version after it,
        should the action's records not come)."""
        self.through = max(self.through, batch[-1].sequence)
        pending = self.pending
        if not pending:
            return self._shown(batch)
        out: list[bytes] = []
        start = 0
        for at, envelope in enumerate(batch):
            due = [cid for cid, (_data, version) in pending.items()
                   if cid == envelope.command_id or version < envelope.sequence]
            if not due:
                continue
            if at > start:
                out += self._shown(batch[start:at])
                start = at
            out += [data for cid in due for data in pending.pop(cid)[0]]
            if not pending:
                break
        return out + self._shown(batch[start:]) if start < len(batch) else out

    def _released(self) -> list[bytes]:
        """The messages of the held batches no action in flight holds back."""
        out: list[bytes] = []
        while self.held and not self._held_back(self.held[0]):
            out += self._emit(self.held.pop(0))
        return out

    def _held_back(self, batch: list[EventEnvelope]) -> bool:
        """Whether ``batch`` holds a record of an action in flight (written after the watch
        began by a command with its id: the action's own, or another's with the same
        id)."""
        mine, live_from = self.mine, self.live_from
        return bool(mine) and any(e.sequence > live_from and mine.get(e.command_id) == 0
                                  for e in batch)

    def _own(self, envelope: EventEnvelope) -> bool:
        """Whether ``envelope`` is left out of the records: written after the watch began by
        one of the stream's applied actions (or by any command of the caller, with
        ``skip_own``)."""
        if envelope.sequence <= self.live_from:
            return False
        cid = envelope.command_id
        if cid in self.mine:
            return True
        return self.every_own is not None and cid.startswith(self.every_own)
