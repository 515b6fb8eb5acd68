"""A live view of one table that stays current: :class:`TableWatch`.

How it works: GetTable, then WatchTable from the view's version, batched
(``WatchTableRequest.batched``: what the table has ready in one message, the records after the
first in its ``more``), each record handed over alone (:func:`records_of`). Each batch of event
records marks the view dirty and a refresher fetches GetTable again (coalescing bursts), so the
client-side state is always exactly what the server shows this viewer, never a second fold
of the rules. The stream is resumed (``after_sequence`` = the last sequence seen, so nothing
is missed or repeated) after a disconnect, a server restart, RESOURCE_EXHAUSTED (a too-slow
watcher cut off) or UNAUTHENTICATED ``token_expired`` (with a fresh token from the
client's provider). For a player, the dealer's WatchMyCards stream (the player's own token)
supplies their own down cards, merged into the view's ``hand.players[...].down``; while the
player has no seat the dealer refuses it (``not_seated``) and it is opened again once the
view shows a seat.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, Final

from stud.v1 import dealer_pb2, table_pb2
from studclient.errors import StudError
from studclient.fairness import HandVerifier, VerdictHook
from studclient.resume import MAX_BACKOFF_S, RESUMABLE, follow

if TYPE_CHECKING:
    from studclient.client import Client

NOT_SEATED: Final = "not_seated"
"""The dealer's refusal of a card watch by a player with no seat (waited out: see
``_follow_cards``)."""

EventHook = Callable[[table_pb2.TableEventRecord], None]


def records_of(message: table_pb2.TableEventRecord) -> list[table_pb2.TableEventRecord]:
    """The records one WatchTable message carries, in order: the message itself, then those
    in its ``more`` (a batched watch, issue 35). Each comes without a ``more`` of its own, as
    an unbatched watch sends it (``message`` loses its ``more``)."""
    if not message.more:
        return [message]
    rest = list(message.more)
    message.ClearField("more")
    return [message, *rest]


def merge_cards(view: table_pb2.TableView, cards: dealer_pb2.MyCards | None
                ) -> table_pb2.TableView:
    """``view`` with the player's own down cards (from the dealer) filled in where the view
    has them face down; ``view`` itself is left unchanged."""
    if cards is None or not view.HasField("hand") or view.hand.hand_number != cards.hand_number:
        return view
    merged = table_pb2.TableView()
    merged.CopyFrom(view)
    for player in merged.hand.players:
        if player.seat != cards.seat:
            continue
        for down, card in zip(player.down, cards.down, strict=False):
            if not down.HasField("card"):
                down.card.CopyFrom(card)
    return merged


class TableWatch:
    """A table view kept current (see the module docstring).

    ``async with client.watch(table_id) as watch:`` then ``watch.view`` (the latest),
    ``async for view in watch.views(): ...`` (each newer view; bursts are coalesced) or
    ``await watch.wait_for(predicate)``. ``on_event`` is called with every event record,
    in order, exactly once.
    """

    def __init__(self, client: Client, table_id: str, *, cards: bool = True,
                 on_event: EventHook | None = None, verify: bool = True, seeds: bool = True,
                 on_verdict: VerdictHook | None = None) -> None:
        self.client = client
        self.table_id = table_id
        self.view: table_pb2.TableView | None = None
        """The latest view, own down cards merged in."""
        self.cards: dealer_pb2.MyCards | None = None
        """The player's own cards in their latest hand (from the dealer)."""
        self.last_sequence = 0
        """The last event sequence received (the resume token)."""
        self.resumes = 0
        """How many times the table stream was resumed."""
        self.error: BaseException | None = None
        self.on_event = on_event
        self._want_cards = cards
        self._raw: table_pb2.TableView | None = None
        self._generation = 0
        self._changed = asyncio.Condition()
        self._dirty = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._calls: set[Any] = set()
        self._closed = False
        self._calls_opened = 0
        self._cards_changed = asyncio.Event()
        self.verifier: HandVerifier | None = None
        """A player's seeds and the check of every hand (docs/fairness.md), once started."""
        self._verify = (verify, seeds, on_verdict)

    async def __aenter__(self) -> TableWatch:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Fetch the view and start following the table (and the player's cards)."""
        view = await self.client.get_table(self.table_id)
        self.last_sequence = view.version
        await self._publish(view)
        self._tasks.append(asyncio.create_task(self._guard(self._follow_table())))
        self._tasks.append(asyncio.create_task(self._guard(self._refresher())))
        role, _name = await self.client.whoami()
        if self._want_cards and role == "player" and self.client.has_dealer:
            verify, seeds, on_verdict = self._verify
            if verify:
                self.verifier = HandVerifier(self.client, self.table_id, seeds=seeds,
                                             on_verdict=on_verdict)
                self.verifier.on_view(view)
            self._tasks.append(asyncio.create_task(self._guard(self._follow_cards())))

    async def close(self) -> None:
        """Stop following; ``views()`` ends."""
        self._closed = True
        for call in list(self._calls):
            call.cancel()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        if self.verifier is not None:
            await self.verifier.close()
        async with self._changed:
            self._changed.notify_all()

    # --- consuming -------------------------------------------------------------------------

    async def views(self) -> AsyncGenerator[table_pb2.TableView, None]:
        """The current view, then each newer one (intermediate ones may be skipped); raises
        the watch's error if it failed, ends when it is closed."""
        seen = -1
        while True:
            async with self._changed:
                while self._generation == seen and not self._closed and self.error is None:
                    await self._changed.wait()
                if self.error is not None:
                    raise self.error
                if self._closed:
                    return
                seen = self._generation
                view = self.view
            assert view is not None
            yield view

    async def wait_for(self, predicate: Callable[[table_pb2.TableView], bool],
                       timeout: float | None = None) -> table_pb2.TableView:
        """The first view (the current one included) for which ``predicate`` holds."""
        async with asyncio.timeout(timeout):
            async for view in self.views():
                if predicate(view):
                    return view
        raise RuntimeError("the watch was closed")

    async def refresh(self) -> table_pb2.TableView:
        """Fetch the view now (it is fetched after every event anyway)."""
        view = await self.client.get_table(self.table_id)
        await self._publish(view)
        assert self.view is not None
        return self.view

    # --- internals -------------------------------------------------------------------------

    async def _publish(self, raw: table_pb2.TableView | None = None) -> None:
        async with self._changed:
            if raw is not None:
                if self._raw is not None and (raw.version < self._raw.version
                                              or raw == self._raw):
                    return  # an older answer overtaken by a newer one, or no change
                self._raw = raw
            if self._raw is None:
                return
            self.view = merge_cards(self._raw, self.cards)
            self._generation += 1
            self._changed.notify_all()

    async def _guard(self, work: Coroutine[Any, Any, None]) -> None:
        """Run one of the watch's tasks; anything unexpected ends the watch with it."""
        try:
            await work
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if not self._closed:
                await self._fail(exc)

    async def _fail(self, error: BaseException) -> None:
        async with self._changed:
            self.error = error
            self._changed.notify_all()

    async def _refresher(self) -> None:
        backoff = 0.05
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            try:
                view = await self.client.get_table(self.table_id)
            except StudError as exc:
                # ``not_owner`` past the call's patience: the table is still changing hands
                # between replicas (a slow takeover), as the stream waits it out.
                if exc.code not in RESUMABLE and exc.reason != "not_owner":
                    await self._fail(exc)
                    return
                self._dirty.set()
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_S)
                continue
            backoff = 0.05
            await self._publish(view)
            if self.verifier is not None:
                self.verifier.on_view(view)
            if view.version < self.last_sequence:
                self._dirty.set()

    async def _stream(self, open_call: Callable[[tuple[tuple[str, str], ...]], Any],
                      handle: Callable[[Any], None],
                      wait_out: Callable[[StudError], Awaitable[bool]] | None = None
                      ) -> None:
        """Follow a server stream opened by ``open_call(metadata)``, resuming it after a
        resumable ending (:func:`~studclient.resume.follow`); ``handle`` gets each message.
        ``wait_out(error)``, when given, may wait out a refusal that is not resumable (True:
        open the stream again)."""
        def opened(metadata: tuple[tuple[str, str], ...]) -> Any:
            call = open_call(metadata)
            self._calls.add(call)
            return call

        await follow(self.client, self.table_id, open_call=opened, handle=handle,
                     closed=lambda: self._closed, fail=self._fail, wait_out=wait_out,
                     done=self._calls.discard)

    async def _follow_table(self) -> None:
        def handle(message: table_pb2.TableEventRecord) -> None:
            # One record at a time, the resume token following each: a hook that raises
            # inside a batch leaves it at the last record handed over.
            for record in records_of(message):
                if record.sequence <= self.last_sequence:
                    continue
                self.last_sequence = record.sequence
                if self.verifier is not None:
                    self.verifier.on_record(record)
                if self.on_event is not None:
                    self.on_event(record)
                self._dirty.set()

        def open_call(metadata: tuple[tuple[str, str], ...]) -> Any:
            if self._calls_opened:
                self.resumes += 1
            self._calls_opened += 1
            return self.client.watch_table_call(self.table_id, self.last_sequence, metadata)

        await self._stream(open_call, handle)

    async def _follow_cards(self) -> None:
        def handle(cards: dealer_pb2.MyCards) -> None:
            self.cards = cards
            if self.verifier is not None:
                self.verifier.on_cards(cards)
            self._cards_changed.set()

        async def publisher() -> None:
            while True:
                await self._cards_changed.wait()
                self._cards_changed.clear()
                await self._publish()

        async def until_seated(error: StudError) -> bool:
            # The dealer refuses (and ends) a watch of cards while the player has no seat:
            # follow the table alone until the view shows one, then watch the cards again.
            if error.reason != NOT_SEATED:
                return False
            async with self._changed:
                await self._changed.wait_for(lambda: self._closed or (
                    self._raw is not None and self._raw.viewer_seat != 0))
            return not self._closed

        task = asyncio.create_task(publisher())
        try:
            await self._stream(
                lambda metadata: self.client.watch_my_cards_call(self.table_id, metadata),
                handle, until_seated)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
