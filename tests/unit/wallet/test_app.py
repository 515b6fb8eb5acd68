"""The application layer without I/O: who may call what, and bounded retries of a cash-out
whose escrow keeps moving (a stub store; the real one is covered by integration tests)."""

from __future__ import annotations

from typing import Any

import pytest

from studkit.auth import Forbidden, Principal, Role
from studkit.errors import Conflict
from studtools.devkeys import DevKeys
from wallet.app import WalletApp
from wallet.config import Settings
from wallet.ledger import Transaction
from wallet.model import (
    Applied,
    BuyIn,
    CashOut,
    Deposit,
    EnterTournament,
    PayPrize,
    Pool,
    PoolEntry,
    RakePolicy,
    Reconciliation,
    RefundEntry,
    SeatResult,
    SettleHand,
    Withdraw,
    player_account,
    seat_account,
)
from wallet.store import BalanceChanged

OPERATOR = Principal(Role.OPERATOR, "ops")
TABLE = Principal(Role.SERVICE, "table")
DEALER = Principal(Role.SERVICE, "dealer")
AUDITOR = Principal(Role.AUDITOR, "audit")
TOURNAMENT = Principal(Role.SERVICE, "tournament")
ALICE = Principal(Role.PLAYER, "alice")
BOB = Principal(Role.PLAYER, "bob")


ENTRY = PoolEntry(entry_id="e1", player_id="alice", buy_in=100, fee=10)


class StubStore:
    """Records applied transactions; can be told to report moved balances."""

    def __init__(self, conflicts: int = 0) -> None:
        self.applied: list[Transaction] = []
        self.conflicts = conflicts
        self.reads = 0

    async def apply(self, transaction: Transaction, protect: object, now_ms: int) -> Applied:
        if self.conflicts:
            self.conflicts -= 1
            raise BalanceChanged("moved")
        self.applied.append(transaction)
        return Applied(transaction_id="1-0", balances={})

    async def balance(self, account: Any) -> int:
        self.reads += 1
        return 100 + self.reads

    async def create_account(self, player_id: str, created_ms: int) -> None:
        return None

    async def reconcile(self, table_id: str) -> Any:
        return Reconciliation(table_id=table_id, seats=())

    async def pool(self, tournament_id: str) -> Pool:
        return Pool(tournament_id=tournament_id, balance=100, entries=(ENTRY,))

    async def pool_entry(self, tournament_id: str, entry_id: str) -> PoolEntry | None:
        self.reads += 1
        return ENTRY if entry_id == ENTRY.entry_id else None


def app_with(store: StubStore, retries: int = 3) -> WalletApp:
    return WalletApp(store, conflict_retries=retries)  # type: ignore[arg-type]


DEPOSIT = Deposit(player_id="alice", amount=5, idempotency_key="k")
WITHDRAW = Withdraw(player_id="alice", amount=5, idempotency_key="k")
BUY_IN = BuyIn(player_id="alice", table_id="t1", seat=1, amount=5, idempotency_key="k")
SETTLE = SettleHand(table_id="t1", hand_id="h", rake_policy=RakePolicy(),
                    results=(SeatResult(seat=1, player_id="alice", amount_in=0, amount_won=0),))
CASH_OUT = CashOut(table_id="t1", seat=1, player_id="alice", idempotency_key="k")
ENTER = EnterTournament(player_id="alice", tournament_id="m1", entry_id="e1", buy_in=100,
                        fee=10, idempotency_key="k")
REFUND = RefundEntry(player_id="alice", tournament_id="m1", entry_id="e1", idempotency_key="k")
PRIZE = PayPrize(player_id="alice", tournament_id="m1", amount=50, place=1,
                 idempotency_key="k")


class TestAccess:
    @pytest.mark.parametrize(
        ("method", "command", "allowed", "denied"),
        [
            ("deposit", DEPOSIT, [OPERATOR], [ALICE, TABLE, DEALER, AUDITOR]),
            ("withdraw", WITHDRAW, [OPERATOR], [ALICE, TABLE, DEALER, AUDITOR]),
            ("buy_in", BUY_IN, [TABLE], [ALICE, BOB, DEALER, OPERATOR, AUDITOR]),
            ("settle_hand", SETTLE, [TABLE], [ALICE, DEALER, OPERATOR, AUDITOR]),
            ("cash_out", CASH_OUT, [TABLE], [ALICE, DEALER, OPERATOR, AUDITOR]),
            ("enter_tournament", ENTER, [TOURNAMENT], [ALICE, TABLE, DEALER, OPERATOR,
                                                       AUDITOR]),
            ("refund_entry", REFUND, [TOURNAMENT], [ALICE, TABLE, DEALER, OPERATOR, AUDITOR]),
            ("pay_prize", PRIZE, [TOURNAMENT], [ALICE, TABLE, DEALER, OPERATOR, AUDITOR]),
        ],
    )
    async def test_money_moves_only_for_allowed_callers(
        self, method: str, command: Any, allowed: list[Principal], denied: list[Principal]
    ) -> None:
        """Each money-moving call is Forbidden to everyone outside its allowed callers (seats
        and settlements are the table service's alone: not the player's own, not the
        dealer's), and a refused call never reaches the store."""
        store = StubStore()
        app = app_with(store)
        for who in denied:
            with pytest.raises(Forbidden):
                await getattr(app, method)(who, command)
        assert store.applied == []
        for who in allowed:
            await getattr(app, method)(who, command)
        assert len(store.applied) == len(allowed)

    async def test_reads_are_own_account_for_players(self) -> None:
        """A player reads only their own account; staff roles read any, seats included."""
        app = app_with(StubStore())
        await app.balance(ALICE, player_account("alice"))
        for account in (player_account("bob"), seat_account("t1", 1)):
            with pytest.raises(Forbidden):
                await app.balance(ALICE, account)
            for who in (TABLE, OPERATOR, AUDITOR):
                await app.balance(who, account)

    async def test_account_creation_is_own_or_operator(self) -> None:
        """Players open their own account; operators any; the table none."""
        app = app_with(StubStore())
        await app.create_account(ALICE, "alice")
        await app.create_account(OPERATOR, "bob")
        for who, name in ((ALICE, "bob"), (TABLE, "carol")):
            with pytest.raises(Forbidden):
                await app.create_account(who, name)


    async def test_a_pool_is_read_by_the_tournament_operators_and_auditors(self) -> None:
        """GetPool: the tournament service, operators, auditors; never a player or the
        table service."""
        app = app_with(StubStore())
        for who in (TOURNAMENT, OPERATOR, AUDITOR):
            assert (await app.pool(who, "m1")).balance == 100
        for who in (ALICE, TABLE, DEALER):
            with pytest.raises(Forbidden):
                await app.pool(who, "m1")

    async def test_a_refund_is_decided_on_the_pool_as_read(self) -> None:
        """The refund's amounts are the entry's as the store records it (buy-in and fee)."""
        store = StubStore()
        await app_with(store).refund_entry(TOURNAMENT, REFUND)
        assert store.reads == 1 and store.applied[0].amount == 110


class TestRetries:
    async def test_cash_out_rereads_after_a_moved_balance(self) -> None:
        """A cash-out whose escrow moved is decided again on a fresh read and applies."""
        store = StubStore(conflicts=2)
        await app_with(store).cash_out(TABLE, CASH_OUT)
        assert store.reads == 3 and store.applied[0].amount == 103

    async def test_gives_up_with_conflict_after_bounded_retries(self) -> None:
        """If the escrow keeps moving, the app raises Conflict (ABORTED) after N attempts."""
        store = StubStore(conflicts=10)
        with pytest.raises(Conflict):
            await app_with(store, retries=3).cash_out(TABLE, CASH_OUT)
        assert store.reads == 3 and store.applied == []


class TestSettings:
    def test_reads_the_environment(self, dev_keys: DevKeys) -> None:
        """Settings come from env vars, with defaults."""
        settings = Settings.from_env({
            "WALLET_ADDR": "127.0.0.1:7000",
            "REDIS_URL": "redis://wallet:pw@redis:6379/0",
            **dev_keys.env("wallet"),
            "LOG_LEVEL": "DEBUG",
        })
        assert settings.addr == "127.0.0.1:7000" and settings.log_level == "DEBUG"
        assert settings.shutdown_grace_s == 5.0
        assert settings.table_services == ("table",)
        assert len(settings.auth_keys) == len(dev_keys.key_set())

    def test_names_the_table_services(self, dev_keys: DevKeys) -> None:
        """WALLET_TABLE_SERVICES names the services that may buy in, settle and cash out;
        the app refuses every other service."""
        env = {**dev_keys.env("wallet"), "WALLET_TABLE_SERVICES": "table-a, table-b"}
        assert Settings.from_env(env).table_services == ("table-a", "table-b")
        with pytest.raises(ValueError):
            Settings.from_env({**env, "WALLET_TABLE_SERVICES": " , "})

    async def test_other_table_services_are_configurable(self) -> None:
        """A wallet configured for ``table-b`` lets it settle and refuses ``table``."""
        store = StubStore()
        app = WalletApp(store, table_services=("table-b",))  # type: ignore[arg-type]
        await app.settle_hand(Principal(Role.SERVICE, "table-b"), SETTLE)
        with pytest.raises(Forbidden):
            await app.settle_hand(TABLE, SETTLE)

    async def test_other_tournament_services_are_configurable(self,
                                                              dev_keys: DevKeys) -> None:
        """WALLET_TOURNAMENT_SERVICES (default ``tournament``) names the services that move
        tournament money; a wallet configured for ``mtt-b`` lets it pay and refuses
        ``tournament``."""
        env = dev_keys.env("wallet")
        assert Settings.from_env(env).tournament_services == ("tournament",)
        settings = Settings.from_env({**env, "WALLET_TOURNAMENT_SERVICES": "mtt-b"})
        assert settings.tournament_services == ("mtt-b",)
        store = StubStore()
        app = WalletApp(store, tournament_services=settings.tournament_services)  # type: ignore[arg-type]
        await app.pay_prize(Principal(Role.SERVICE, "mtt-b"), PRIZE)
        with pytest.raises(Forbidden):
            await app.pay_prize(TOURNAMENT, PRIZE)
        assert len(store.applied) == 1

    def test_never_shows_secrets(self, dev_keys: DevKeys) -> None:
        """repr omits the Redis URL; the redacted URL hides the password."""
        settings = Settings.from_env({"REDIS_URL": "redis://wallet:hunter2@redis:6379/0",
                                      **dev_keys.env("wallet")})
        assert "hunter2" not in repr(settings)
        assert settings.redis_url_redacted == "redis://wallet:***@redis:6379/0"

    def test_requires_a_key_set(self, dev_keys: DevKeys) -> None:
        """Without STUD_AUTH_PUBLIC_KEYS the wallet does not start, and the retired shared
        secret is refused rather than ignored."""
        with pytest.raises(RuntimeError, match="STUD_AUTH_PUBLIC_KEYS"):
            Settings.from_env({})
        with pytest.raises(RuntimeError, match="STUD_AUTH_SECRET"):
            Settings.from_env({**dev_keys.env("wallet"), "STUD_AUTH_SECRET": "s" * 40})
