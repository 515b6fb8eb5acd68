"""One simulated room: the wallet's and the dealer's app objects on the simulated store, and
table processes (each the real ``TableApp`` with its actors, drivers and money sagas) that
crash, restart from the log, pause past their lease while another takes over, and resume.
Everything random is drawn from one seed (:class:`Rngs`)."""

from __future__ import annotations

import asyncio
import copy
import random
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from dealer.app import DealerApp
from dealer.shuffle import Entropy
from dealer.store import DealerStore
from dealer.tables import PublicTables
from sim.loop import SimLoop
from sim.network import Counter, NetFaults, SimChannel, as_channel, channels
from sim.redis import Data, Faults, SimRedis, as_client
from studkit import keys
from studkit.mapping import event_from_envelope
from studkit.store import EventStore
from table.actor import ActorDeps, TableActor
from table.app import TableApp
from table.clients import DealerClient, Retry, WalletClient
from table.port import Driving, System
from wallet.app import WalletApp
from wallet.protection_app import ProtectionApp
from wallet.protection_store import ProtectionStore
from wallet.store import WalletStore


class Rngs:
    """The run's random sources, each derived from the one seed (so adding draws to one
    part of the simulation does not move the others)."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.players = random.Random(f"{seed}:players")
        self.net = random.Random(f"{seed}:net")
        self.store = random.Random(f"{seed}:store")
        self.faults = random.Random(f"{seed}:faults")
        self.deck = random.Random(f"{seed}:deck")
        self.jitter = random.Random(f"{seed}:jitter")
        self.watchers = random.Random(f"{seed}:watchers")
        self.aimed = random.Random(f"{seed}:aimed")
        self.protection = random.Random(f"{seed}:protection")


def seeded_entropy(rng: random.Random) -> Entropy:
    """The dealer's randomness from the seed (the production dealer uses the CSPRNG)."""
    def shuffled() -> tuple[int, ...]:
        order = list(range(52))
        rng.shuffle(order)
        return tuple(order)
    return Entropy(shuffled=shuffled, new_salt=lambda: rng.randbytes(32),
                   card_salts=lambda: tuple(rng.randbytes(32) for _ in range(52)),
                   new_seed=lambda: rng.randbytes(32))


@dataclass
class Probabilities:
    """The faults and their probabilities (docs/reliability.md has the table)."""

    store_fail_before: float = 0.002
    store_fail_after: float = 0.002
    net: NetFaults = field(default_factory=lambda: NetFaults(
        lose_request=0.005, lose_reply=0.005, delay=0.01, duplicate=0.01,
        answer_twice=0.005))
    crash_per_s: float = 0.002
    """Per table process and simulated second: killed at whatever await it is in."""
    takeover_per_s: float = 0.001
    """Per table process and simulated second: paused past its lease, another takes over."""
    clock_jump_per_s: float = 0.002
    """Per simulated second: the tables' wall clock jumps (-2 .. +40 s)."""
    watcher_disconnect: float = 0.01
    """Per event a watcher receives: it disconnects, then resumes from its last sequence."""
    aimed_crash: float = 0.3
    """Per table process, once it has taken its table: armed to crash right after its N-th
    store or network call returns, before it acts on the answer."""
    aimed_within: int = 1500
    """N is drawn uniformly from 1 .. this."""
    protection: float = 0.0
    """Per player and tick: the player sets a wager or loss limit (one time in six: takes a
    day's break). Off by default (each seed's run stays as it was); ``make sim
    --protection``."""
    archive: float = 0.0
    """Per table and simulated second: the archiver's step (copy, verify, trim) runs for
    it (``sim.archive``; issue 31). Off by default; ``python -m sim --archive``."""

    @classmethod
    def none(cls) -> Probabilities:
        return cls(0.0, 0.0, NetFaults(), 0.0, 0.0, 0.0, 0.0, 0.0)


class Process:
    """One table process: its own connection to the store and channels, its TableApp."""

    def __init__(self, world: World, name: str) -> None:
        self.world = world
        self.name = name
        self.dead = False
        p = world.probabilities
        self.redis = SimRedis(world.data, Faults(world.rngs.store, 0.0005,
                                                 p.store_fail_before, p.store_fail_after))
        self.events = EventStore(as_client(self.redis))
        self.dealer_channel, self.wallet_channel = channels(
            world.wallet, world.dealer, p.net, world.rngs.net, world.counter,
            lambda: not self.dead,
            world.protection if p.protection else None)  # off: each seed's run as it was
        self.table_id = ""
        """The table it took (a process serves one)."""
        self.aimed = 0
        """Calls left before an aimed crash (0: none armed)."""
        self.on_aimed: Callable[[Process, str], None] | None = None
        """Kills the process when its aimed call returns (set by the run)."""
        self.redis.on_return = self.dealer_channel.on_return = \
            self.wallet_channel.on_return = self._returned
        retry = Retry(deadline_s=3.0, jitter=world.rngs.jitter.random)
        dealer = DealerClient(as_channel(self.dealer_channel), lambda: (), retry)
        wallet = WalletClient(as_channel(self.wallet_channel), lambda: (), retry)
        loop = world.loop

        def deps_for() -> ActorDeps:
            return ActorDeps(store=self.events, redis=as_client(self.redis), clock=loop.wall,
                             snapshot_every=5)
        self.app = TableApp(self.events, deps_for,
                            Driving(System(dealer=dealer, wallet=wallet, clock=loop.wall)))
        self.app.tables.ready = True
        self.tasks: dict[asyncio.Task[None], None] = {}
        """Its tasks in the order they were spawned (a kill cancels them in that order: a
        set's order follows the tasks' addresses, which differ from run to run)."""

    def _returned(self, call: str) -> None:
        if self.aimed and not self.dead:
            self.aimed -= 1
            if not self.aimed and self.on_aimed is not None:
                self.on_aimed(self, call)

    def spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(coro)
        self.tasks[task] = None
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[None]) -> None:
        self.tasks.pop(task, None)

    def actor(self, table_id: str) -> TableActor | None:
        return None if self.dead else self.app.actor_of(table_id)

    def pause(self) -> None:
        self.redis.gate.clear()
        for ch in (self.dealer_channel, self.wallet_channel):
            ch.paused.clear()

    def resume(self) -> None:
        self.redis.gate.set()
        for ch in (self.dealer_channel, self.wallet_channel):
            ch.paused.set()

    def kill(self) -> None:
        """Dead at whatever await each task is in: every task cancelled, no call gets out."""
        self.dead = True
        self.redis.dead = True
        self.resume()
        for driver in list(self.app.tables.drivers.values()):
            driver.stopping = True
            if driver.task is not None:
                driver.task.cancel()
        for task in list(self.tasks):
            task.cancel()


@dataclass
class Takeover:
    """A table whose owner was paused at ``at`` and replaced with ``epoch``."""

    table_id: str
    epoch: int
    at: int
    """Index into the store's appends from which the old epoch must never appear."""


class World:
    """The wallet, the dealer and the table processes of one run."""

    def __init__(self, seed: int, loop: SimLoop, probabilities: Probabilities) -> None:
        self.seed = seed
        self.loop = loop
        self.rngs = Rngs(seed)
        self.probabilities = copy.deepcopy(probabilities)
        """The run's own copy: the run changes it (the settling turns the faults off, a
        test's tweak may), and the caller's object, given to the next run, stays as given."""
        self.data = Data(now_ms=loop.wall_ms)
        self.counter = Counter()
        wallet_redis = SimRedis(self.data, decode=True)
        self.wallet_store = WalletStore(as_client(wallet_redis))
        self.wallet = WalletApp(self.wallet_store, clock_ms=loop.wall_ms)
        self.protection = ProtectionApp(ProtectionStore(as_client(wallet_redis)),
                                        clock_ms=loop.wall_ms)
        dealer_redis = SimRedis(self.data)
        self.dealer_store = DealerStore(as_client(dealer_redis))
        self.dealer = DealerApp(
            self.dealer_store,
            PublicTables(EventStore(as_client(dealer_redis)), event_from_envelope),
            clock_ms=loop.wall_ms, entropy=seeded_entropy(self.rngs.deck), seed_wait_ms=0)
        self.archive: Any = None
        """The simulated archive store (``sim.archive.SimHistory``) when the archiver runs:
        the checks read a table's log as the archive's head and the stream's rest."""
        self.owner: dict[str, Process] = {}
        self.epoch: dict[str, int] = {}
        self.processes: list[Process] = []
        self.takeovers: list[Takeover] = []
        self._names = 0

    def new_process(self) -> Process:
        self._names += 1
        proc = Process(self, f"p{self._names}")
        self.processes.append(proc)
        return proc

    def set_epoch(self, table_id: str, epoch: int) -> None:
        """The lease's fence (the owner record the append script checks)."""
        self.epoch[table_id] = epoch
        self.data.hashes.setdefault(keys.table_owner(table_id).encode(), {})[b"epoch"] = \
            str(epoch).encode()

    async def take(self, table_id: str, proc: Process) -> None:
        """``proc`` takes the table with the next epoch: loaded from the log and driven."""
        epoch = self.epoch.get(table_id, 0) + 1
        self.set_epoch(table_id, epoch)
        self.takeovers.append(Takeover(table_id, epoch, len(self.data.appends)))
        self.owner.pop(table_id, None)
        await proc.app.tables.load(table_id, epoch=epoch)
        self.owner[table_id] = proc
        proc.table_id = table_id

    def live(self) -> list[Process]:
        return [p for p in self.processes if not p.dead]

    def channels_of(self) -> list[SimChannel]:
        return [c for p in self.processes for c in (p.dealer_channel, p.wallet_channel)]

    def faults(self) -> int:
        store = sum(p.redis.faults.injected for p in self.processes)
        return store + self.counter.total

    def count(self, name: str) -> None:
        self.counter.add(name)

    def clock(self) -> Callable[[], float]:
        return self.loop.wall
