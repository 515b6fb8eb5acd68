"""Protobuf <-> wallet domain values, pure. Raises :class:`~studkit.errors.BadRequest` naming
the field for malformed input (ids, missing oneofs, unspecified enums); amount rules live in
``ledger``."""

from __future__ import annotations

from typing import Final, Protocol

from rules.streets import Street
from stud.v1 import wallet_pb2 as pb
from studkit.errors import BadRequest
from studkit.keys import check_id
from wallet.model import (
    EXTERNAL,
    HOUSE,
    MAX_SEAT,
    AccountId,
    AccountKind,
    Applied,
    BuyIn,
    CashOut,
    Deposit,
    EnterTournament,
    PayPrize,
    Pool,
    RakePolicy,
    Reconciliation,
    RefundEntry,
    SeatResult,
    SettleHand,
    StatementPage,
    TxKind,
    Withdraw,
    player_account,
    pool_account,
    seat_account,
)

_STREETS: Final = {
    pb.SettleHandRequest.STREET_THIRD: Street.THIRD,
    pb.SettleHandRequest.STREET_FOURTH: Street.FOURTH,
    pb.SettleHandRequest.STREET_FIFTH: Street.FIFTH,
    pb.SettleHandRequest.STREET_SIXTH: Street.SIXTH,
    pb.SettleHandRequest.STREET_SEVENTH: Street.SEVENTH,
}
_SYSTEM: Final = {pb.SYSTEM_ACCOUNT_HOUSE: HOUSE, pb.SYSTEM_ACCOUNT_EXTERNAL: EXTERNAL}
_KINDS: Final = {
    TxKind.DEPOSIT: pb.TRANSACTION_KIND_DEPOSIT,
    TxKind.WITHDRAWAL: pb.TRANSACTION_KIND_WITHDRAWAL,
    TxKind.BUY_IN: pb.TRANSACTION_KIND_BUY_IN,
    TxKind.SETTLEMENT: pb.TRANSACTION_KIND_SETTLEMENT,
    TxKind.CASH_OUT: pb.TRANSACTION_KIND_CASH_OUT,
    TxKind.TOURNAMENT_ENTRY: pb.TRANSACTION_KIND_TOURNAMENT_ENTRY,
    TxKind.ENTRY_REFUND: pb.TRANSACTION_KIND_ENTRY_REFUND,
    TxKind.PRIZE: pb.TRANSACTION_KIND_PRIZE,
}


def ident(value: str, field: str) -> str:
    """``value`` if it is a safe id (1-64 of letters, digits, '_', '.', '-')."""
    try:
        return check_id(value, field)
    except ValueError as exc:
        raise BadRequest(field, str(exc), reason="malformed_id") from None


# --- requests -> domain ---------------------------------------------------------------------


class _Keyed(Protocol):
    command_id: str
    idempotency_key: str


def command_key(request: _Keyed) -> str:
    """The request's idempotency key: ``command_id``, or its former name
    ``idempotency_key``; both set and different is refused."""
    if request.command_id and request.idempotency_key \
            and request.command_id != request.idempotency_key:
        raise BadRequest("command_id", "differs from idempotency_key (its former name): "
                         "send one", reason="conflicting_keys")
    if request.command_id:
        return ident(request.command_id, "command_id")
    return ident(request.idempotency_key, "idempotency_key")


def settlement_hand(request: pb.SettleHandRequest) -> str:
    """The settled hand as the ledger keys it ("h<N>"): from ``hand_number``, or the former
    ``hand_id``; both set and different is refused."""
    if request.hand_number:
        hand_id = f"h{request.hand_number}"
        if request.hand_id and request.hand_id != hand_id:
            raise BadRequest("hand_number", f"differs from hand_id {request.hand_id!r}",
                             reason="conflicting_keys")
        return hand_id
    return ident(request.hand_id, "hand_id")


def hand_number_of(hand_id: str) -> int:
    """``"h12"`` -> 12; 0 for anything else (a hand id of another form, or none).

    >>> hand_number_of("h12"), hand_number_of(""), hand_number_of("x")
    (12, 0, 0)
    """
    return int(hand_id[1:]) if hand_id[:1] == "h" and hand_id[1:].isdigit() else 0


def account_from_proto(ref: pb.AccountRef, field: str = "account") -> AccountId:
    """The account a request names."""
    match ref.WhichOneof("account"):
        case "player_id":
            return player_account(ident(ref.player_id, f"{field}.player_id"))
        case "seat":
            table_id = ident(ref.seat.table_id, f"{field}.seat.table_id")
            if not 1 <= ref.seat.seat <= MAX_SEAT:
                raise BadRequest(f"{field}.seat.seat", f"must be 1..{MAX_SEAT}")
            return seat_account(table_id, ref.seat.seat)
        case "system":
            if ref.system not in _SYSTEM:
                raise BadRequest(f"{field}.system", "unspecified system account")
            return _SYSTEM[ref.system]
        case "tournament_pool":
            return pool_account(ident(ref.tournament_pool, f"{field}.tournament_pool"))
        case _:
            raise BadRequest(field, "name a player, a seat, a tournament pool or a system "
                             "account")


def account_to_proto(account: AccountId) -> pb.AccountRef:
    """The wire form of an account."""
    match account.kind:
        case AccountKind.PLAYER:
            return pb.AccountRef(player_id=account.player_id)
        case AccountKind.SEAT:
            return pb.AccountRef(seat=pb.SeatAccount(table_id=account.table_id, seat=account.seat))
        case AccountKind.POOL:
            return pb.AccountRef(tournament_pool=account.tournament_id)
        case AccountKind.HOUSE:
            return pb.AccountRef(system=pb.SYSTEM_ACCOUNT_HOUSE)
        case AccountKind.EXTERNAL:
            return pb.AccountRef(system=pb.SYSTEM_ACCOUNT_EXTERNAL)


def deposit_from_proto(request: pb.DepositRequest) -> Deposit:
    """A deposit command."""
    return Deposit(
        player_id=ident(request.player_id, "player_id"),
        amount=request.amount,
        idempotency_key=command_key(request),
    )


def withdraw_from_proto(request: pb.WithdrawRequest) -> Withdraw:
    """A withdrawal command."""
    return Withdraw(
        player_id=ident(request.player_id, "player_id"),
        amount=request.amount,
        idempotency_key=command_key(request),
    )


def buy_in_from_proto(request: pb.BuyInRequest) -> BuyIn:
    """A buy-in command."""
    return BuyIn(
        player_id=ident(request.player_id, "player_id"),
        table_id=ident(request.table_id, "table_id"),
        seat=request.seat,
        amount=request.amount,
        idempotency_key=command_key(request),
        sit_down=request.sit_down,
    )


def settle_hand_from_proto(request: pb.SettleHandRequest) -> SettleHand:
    """A settlement command. The street may be left unspecified only for a settlement that
    moves nothing (a voided hand, RULES 9.8: every seat wins back what it put in, no rake),
    which has no street to rake on."""
    moves_nothing = bool(request.seats) and request.rake == 0 and all(
        s.amount_won == s.amount_in for s in request.seats)
    if request.ended_on_street not in _STREETS and not (
            moves_nothing and request.ended_on_street == pb.SettleHandRequest.STREET_UNSPECIFIED):
        raise BadRequest("ended_on_street", "name the street the hand ended on")
    return SettleHand(
        table_id=ident(request.table_id, "table_id"),
        hand_id=settlement_hand(request),
        results=tuple(
            SeatResult(
                seat=s.seat,
                player_id=ident(s.player_id, f"seats[{i}].player_id"),
                amount_in=s.amount_in,
                amount_won=s.amount_won,
            )
            for i, s in enumerate(request.seats)
        ),
        rake=request.rake,
        rake_policy=RakePolicy(
            percent_bps=request.rake_policy.percent_bps, cap=request.rake_policy.cap
        ),
        ended_on=_STREETS.get(request.ended_on_street),
    )


def cash_out_from_proto(request: pb.CashOutRequest) -> CashOut:
    """A cash-out command."""
    return CashOut(
        table_id=ident(request.table_id, "table_id"),
        seat=request.seat,
        player_id=ident(request.player_id, "player_id"),
        idempotency_key=command_key(request),
    )


def enter_tournament_from_proto(request: pb.EnterTournamentRequest) -> EnterTournament:
    """A tournament entry."""
    return EnterTournament(
        player_id=ident(request.player_id, "player_id"),
        tournament_id=ident(request.tournament_id, "tournament_id"),
        entry_id=ident(request.entry_id, "entry_id"),
        buy_in=request.buy_in,
        fee=request.fee,
        idempotency_key=command_key(request),
    )


def refund_entry_from_proto(request: pb.RefundEntryRequest) -> RefundEntry:
    """A refund of one tournament entry."""
    return RefundEntry(
        player_id=ident(request.player_id, "player_id"),
        tournament_id=ident(request.tournament_id, "tournament_id"),
        entry_id=ident(request.entry_id, "entry_id"),
        idempotency_key=command_key(request),
    )


def pay_prize_from_proto(request: pb.PayPrizeRequest) -> PayPrize:
    """A prize payment."""
    return PayPrize(
        player_id=ident(request.player_id, "player_id"),
        tournament_id=ident(request.tournament_id, "tournament_id"),
        amount=request.amount,
        place=request.place,
        idempotency_key=command_key(request),
    )


# --- domain -> responses --------------------------------------------------------------------


def deposit_to_proto(command: Deposit, applied: Applied) -> pb.DepositResponse:
    """The reply to a deposit."""
    return pb.DepositResponse(
        transaction_id=applied.transaction_id,
        balance=applied.balance(player_account(command.player_id)),
        replayed=applied.replayed,
    )


def withdraw_to_proto(command: Withdraw, applied: Applied) -> pb.WithdrawResponse:
    """The reply to a withdrawal."""
    return pb.WithdrawResponse(
        transaction_id=applied.transaction_id,
        balance=applied.balance(player_account(command.player_id)),
        replayed=applied.replayed,
    )


def buy_in_to_proto(command: BuyIn, applied: Applied) -> pb.BuyInResponse:
    """The reply to a buy-in."""
    return pb.BuyInResponse(
        transaction_id=applied.transaction_id,
        player_balance=applied.balance(player_account(command.player_id)),
        seat_balance=applied.balance(seat_account(command.table_id, command.seat)),
        replayed=applied.replayed,
    )


def settle_hand_to_proto(command: SettleHand, applied: Applied) -> pb.SettleHandResponse:
    """The reply to a settlement: each settled seat's escrow after it."""
    return pb.SettleHandResponse(
        transaction_id=applied.transaction_id,
        seats=[
            pb.EscrowSeat(
                seat=r.seat,
                player_id=r.player_id,
                balance=applied.balance(seat_account(command.table_id, r.seat)),
            )
            for r in command.results
        ],
        rake=command.rake,
        replayed=applied.replayed,
        table_seats=[pb.EscrowSeat(seat=s.seat, player_id=s.player_id, balance=s.balance)
                     for s in applied.escrows],
    )


def cash_out_to_proto(command: CashOut, applied: Applied) -> pb.CashOutResponse:
    """The reply to a cash-out."""
    player = player_account(command.player_id)
    return pb.CashOutResponse(
        transaction_id=applied.transaction_id,
        amount=applied.amount,
        player_balance=applied.balance(player),
        replayed=applied.replayed,
    )


def statement_to_proto(page: StatementPage) -> pb.GetStatementResponse:
    """A statement page on the wire."""
    return pb.GetStatementResponse(
        lines=[
            pb.StatementLine(
                posting_id=line.posting_id,
                transaction_id=line.transaction_id,
                kind=_KINDS[line.kind],
                amount=line.amount,
                balance_after=line.balance_after,
                recorded_at_unix_ms=line.recorded_at_ms,
                table_id=line.table_id,
                hand_id=line.hand_id,
                hand_number=hand_number_of(line.hand_id),
                tournament_id=line.tournament_id,
            )
            for line in page.lines
        ],
        next_page_token=page.next_page_token,
    )


def reconciliation_to_proto(reconciliation: Reconciliation) -> pb.ReconcileResponse:
    """A table's escrows on the wire."""
    return pb.ReconcileResponse(
        table_id=reconciliation.table_id,
        seats=[
            pb.EscrowSeat(seat=s.seat, player_id=s.player_id, balance=s.balance)
            for s in reconciliation.seats
        ],
        total=reconciliation.total,
        last_hand_id=reconciliation.last_hand_id,
        last_hand_number=hand_number_of(reconciliation.last_hand_id),
    )


def enter_tournament_to_proto(command: EnterTournament,
                              applied: Applied) -> pb.EnterTournamentResponse:
    """The reply to a tournament entry."""
    return pb.EnterTournamentResponse(
        transaction_id=applied.transaction_id,
        player_balance=applied.balance(player_account(command.player_id)),
        pool_balance=applied.balance(pool_account(command.tournament_id)),
        replayed=applied.replayed,
    )


def refund_entry_to_proto(command: RefundEntry, applied: Applied) -> pb.RefundEntryResponse:
    """The reply to a refund: what went back (buy-in plus fee)."""
    return pb.RefundEntryResponse(
        transaction_id=applied.transaction_id,
        amount=applied.amount,
        player_balance=applied.balance(player_account(command.player_id)),
        pool_balance=applied.balance(pool_account(command.tournament_id)),
        replayed=applied.replayed,
    )


def pay_prize_to_proto(command: PayPrize, applied: Applied) -> pb.PayPrizeResponse:
    """The reply to a prize payment."""
    return pb.PayPrizeResponse(
        transaction_id=applied.transaction_id,
        player_balance=applied.balance(player_account(command.player_id)),
        pool_balance=applied.balance(pool_account(command.tournament_id)),
        replayed=applied.replayed,
    )


def pool_to_proto(pool: Pool) -> pb.GetPoolResponse:
    """A tournament pool on the wire."""
    return pb.GetPoolResponse(
        tournament_id=pool.tournament_id,
        balance=pool.balance,
        entries=[pb.PoolEntry(entry_id=e.entry_id, player_id=e.player_id, buy_in=e.buy_in,
                              fee=e.fee, refunded=e.refunded) for e in pool.entries],
        prizes=[pb.PoolPrize(idempotency_key=p.key, player_id=p.player_id, amount=p.amount,
                             place=p.place) for p in pool.prizes],
        buy_ins=pool.buy_ins,
        fees=pool.fees,
        refunded=pool.refunded,
        prizes_paid=pool.prizes_paid,
    )
