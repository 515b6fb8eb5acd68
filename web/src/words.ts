// Cards, amounts and events in words (as libs/studclient/tui/text.py says them).
import type { Card, LegalAction } from "./gen/stud/v1/common_pb";
import { ActionKind } from "./gen/stud/v1/common_pb";
import type { TableEvent } from "./gen/stud/v1/events_pb";
import { Share } from "./gen/stud/v1/events_pb";

const RANKS: Record<number, string> = { 2: "2", 3: "3", 4: "4", 5: "5", 6: "6", 7: "7", 8: "8", 9: "9",
  10: "T", 11: "J", 12: "Q", 13: "K", 14: "A" };
const SUITS: Record<number, string> = { 1: "c", 2: "d", 3: "h", 4: "s" };
const SUIT_SIGNS: Record<number, string> = { 1: "♣", 2: "♦", 3: "♥", 4: "♠" };

export function chips(amount: bigint | number): string {
  return Number(amount).toLocaleString("en-US");
}

/** "Ah" as the rules write it. */
export function cardText(card: Card | undefined): string {
  if (!card) return "??";
  return (RANKS[card.rank] ?? "?") + (SUITS[card.suit] ?? "?");
}

/** "A♥" for the eye; the text form goes in the accessible name. */
export function cardSign(card: Card): string {
  return (RANKS[card.rank] ?? "?") + (SUIT_SIGNS[card.suit] ?? "?");
}

/** 0..51: 2c is 0, As is 51 (rules.Card.index). */
export function cardIndex(card: Card | undefined): number {
  if (!card) return -1;
  return (card.rank - 2) * 4 + (card.suit - 1);
}

/** The button's accessible name: the action first, then its amount. */
export function actionLabel(a: LegalAction): string {
  const suffix = a.allIn ? " (all-in)" : "";
  switch (a.kind) {
    case ActionKind.BRING_IN: return `Bring in ${chips(a.amount)}${suffix}`;
    case ActionKind.COMPLETE: return `Complete to ${chips(a.to)}${suffix}`;
    case ActionKind.BET: return `Bet ${chips(a.to)}${suffix}`;
    case ActionKind.RAISE: return `Raise to ${chips(a.to)}${suffix}`;
    case ActionKind.CALL: return `Call ${chips(a.amount)}${suffix}`;
    case ActionKind.CHECK: return "Check";
    case ActionKind.FOLD: return "Fold";
    default: return "?";
  }
}

const STREETS: Record<number, string> = { 3: "3rd street", 4: "4th street", 5: "5th street", 6: "6th street", 7: "7th street" };

export function streetText(street: number): string {
  return STREETS[street] ?? "";
}

/** One line of the dealer's log, or "" for an event not worth a line. */
export function eventText(e: TableEvent, who: (seat: number) => string): string {
  const c = e.event;
  switch (c.case) {
    case "tableOpened": return `Table ${c.value.tableId} opened`;
    case "playerSeated": return `${c.value.playerId} sits in seat ${c.value.seat} with ${chips(c.value.stack)}`;
    case "playerLeft": return `${c.value.playerId} leaves seat ${c.value.seat} with ${chips(c.value.stack)}`;
    case "playerSatOut": return `${who(c.value.seat)} sits out`;
    case "playerSatIn": return `${who(c.value.seat)} is back in`;
    case "chipsAdded": return `${who(c.value.seat)} adds ${chips(c.value.amount)}`;
    case "handStarted": return `Hand ${c.value.handNumber} starts (seats ${c.value.seats.join(", ")})`;
    case "antePosted": return `${who(c.value.seat)} antes ${chips(c.value.amount)}`;
    case "cardBurned": return "A card is burned";
    case "burnsReshuffled": return `${c.value.count} burned cards are shuffled back in`;
    case "downCardDealt": return "";
    case "upCardDealt": return `${who(c.value.seat)} gets ${cardText(c.value.card)} (${streetText(c.value.street)})`;
    case "communityCardDealt": return `Community card ${cardText(c.value.card)}`;
    case "bringInPosted": return `${who(c.value.seat)} brings in ${chips(c.value.amount)}`;
    case "completed": return `${who(c.value.seat)} completes to ${chips(c.value.to)}`;
    case "betMade": return `${who(c.value.seat)} bets ${chips(c.value.to)}`;
    case "raised": return `${who(c.value.seat)} raises to ${chips(c.value.to)}`;
    case "called": return `${who(c.value.seat)} calls ${chips(c.value.amount)}`;
    case "checked": return `${who(c.value.seat)} checks`;
    case "folded": return `${who(c.value.seat)} folds`;
    case "actionTimedOut": return `${who(c.value.seat)} ran out of time`;
    case "uncalledBetReturned": return `${chips(c.value.amount)} uncalled goes back to ${who(c.value.seat)}`;
    case "handExposed": return `${who(c.value.seat)} turns up ${c.value.down.map(cardText).join(" ")}`;
    case "handShown": return `${who(c.value.seat)} shows ${c.value.down.map(cardText).join(" ")}`;
    case "handMucked": return `${who(c.value.seat)} mucks`;
    case "potAwarded": {
      const share = c.value.share === Share.HIGH ? " (high)" : c.value.share === Share.LOW ? " (low)" : "";
      const pot = c.value.pot === 0 ? "the pot" : `side pot ${c.value.pot}`;
      return `${who(c.value.seat)} wins ${chips(c.value.amount)} from ${pot}${share}` +
        (c.value.hand ? ` with ${c.value.hand}` : "");
    }
    case "rakeTaken": return `The house takes ${chips(c.value.amount)}`;
    case "handVoided": return `Hand ${c.value.handNumber} is void: ${c.value.reason}`;
    case "stakesChanged": return `Stakes now ${chips(c.value.smallBet)}/${chips(c.value.bigBet)}, ante ${chips(c.value.ante)}, bring-in ${chips(c.value.bringIn)}`;
    case "handEnded": return `Hand ${c.value.handNumber} ends`;
    default: return "";
  }
}

export function countdown(secondsLeft: number): string {
  const whole = Math.max(0, Math.ceil(secondsLeft));
  return `${Math.floor(whole / 60)}:${String(whole % 60).padStart(2, "0")}`;
}
