// One table in the page: the view (GetTable), the live feed (WatchTable, resumed from the last
// sequence), the player's own cards (WatchMyCards), the actions the view offers, the seat's
// controls, the dealer's log, the last hand and the deal check of every hand.
import { timestampMs, type Timestamp } from "@bufbuild/protobuf/wkt";
import type { Api } from "./api";
import { commandId, isAbort, refusal, refusalText } from "./api";
import type { LegalAction } from "./gen/stud/v1/common_pb";
import { ActionKind } from "./gen/stud/v1/common_pb";
import type { MyCards } from "./gen/stud/v1/dealer_pb";
import type { TableEvent } from "./gen/stud/v1/events_pb";
import { HandPhase, type TableEventRecord, type TableView } from "./gen/stud/v1/table_pb";
import { TournamentPhase, type TournamentView } from "./gen/stud/v1/tournament_pb";
import * as V from "./verify";
import { actionLabel, cardIndex, cardSign, cardText, chips, countdown, eventText, streetText } from "./words";

const AHEAD = 2;
const LOG_LINES = 60;
/** A burst of the feed's records is read once: after this long without another record... */
const QUIET_MS = 60;
/** ...or this long after its first, whichever is sooner. */
const BURST_MS = 200;

function el<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Record<string, string> = {},
                                                   ...children: (Node | string)[]): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  node.append(...children);
  return node;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function cardNode(card: { rank: number; suit: number } | undefined, cls = "card"): HTMLElement {
  if (!card) return el("span", { class: `${cls} back`, "aria-label": "face down" }, "🂠");
  const red = card.suit === 2 || card.suit === 3;
  return el("span", { class: `${cls}${red ? " red" : ""}`, "aria-label": cardText(card as never),
                      "data-card": cardText(card as never) }, cardSign(card as never));
}

export interface Host {
  api: Api;
  player: string;
  onSignInNeeded(reason: string): void;
  /** The tournament moved the player: show `to` in place of `from`. */
  onMoved(from: string, to: string): void;
  onClose(table: string): void;
  /** A seat was taken or left: the lobby's figures changed. */
  onChanged(): void;
  /** Whether the page holds a live token now (renewed after a stream's ended). */
  signedIn(): boolean;
}

export class TablePane {
  readonly root: HTMLElement;
  private view: TableView | null = null;
  private lastSeq = 0n;
  private readonly abort = new AbortController();
  private cardsAbort: AbortController | null = null;
  private readonly cards = new Map<bigint, MyCards>();
  private readonly commitments = new Map<number, string>();
  private readonly seeds = new Map<number, V.OwnSeed>();
  private readonly log: string[] = [];
  /** Who sits where, from the feed itself (a log line is never a view behind). */
  private readonly names = new Map<number, string>();
  private refreshTimer: number | null = null;
  private burstStart = 0;
  /** The read of the view in flight (at most one), and whether another is asked for. */
  private reading: Promise<void> | null = null;
  private forceRead = false;
  /** The newest table version the page has heard of: a record's sequence, a command's answer. */
  private known = 0n;
  private busy = false;
  private tournament: TournamentView | null = null;
  private lastTournamentRead = 0;
  /** Every record received, in order (the tests read it: no event lost or doubled). */
  readonly received: bigint[] = [];

  private readonly els: Record<string, HTMLElement> = {};

  constructor(private readonly host: Host, readonly tableId: string) {
    this.root = el("section", { class: "table", "aria-label": `Table ${tableId}`, "data-table": tableId });
    const bar = el("header", { class: "bar" },
      el("h2", {}, `Table ${tableId}`),
      this.mk("status", "p", { class: "status", "aria-live": "polite" }),
      el("button", { type: "button", class: "close", "aria-label": `Close table ${tableId}` }, "×"));
    (bar.querySelector("button.close") as HTMLButtonElement).onclick = () => host.onClose(tableId);
    this.root.append(
      bar,
      this.mk("tourney", "p", { class: "tourney", hidden: "" }),
      this.mk("clock", "p", { class: "clock", "aria-label": "Clock" }),
      this.mk("seats", "div", { class: "seats" }),
      this.mk("pot", "div", { class: "pot", role: "region", "aria-label": "Pot" }),
      this.mk("mine", "div", { class: "mine", role: "region", "aria-label": "Your cards" }),
      this.mk("actions", "div", { class: "actions", role: "group", "aria-label": "Actions" }),
      this.mk("error", "p", { class: "error", role: "alert" }),
      this.mk("controls", "div", { class: "controls" }),
      this.mk("check", "p", { class: "check", role: "status", "aria-label": "Deal check" }),
      el("details", { class: "logbox", open: "" }, el("summary", {}, "Dealer"),
         this.mk("log", "ol", { class: "log", "aria-label": "Dealer log" })),
      el("details", { class: "lastbox" }, el("summary", {}, "Last hand"),
         this.mk("last", "div", { class: "last", "aria-label": "Last hand" })),
      this.mk("rail", "div", { class: "rail", hidden: "" }),
    );
  }

  private mk(name: string, tag: keyof HTMLElementTagNameMap, attrs: Record<string, string>): HTMLElement {
    const node = el(tag, attrs);
    this.els[name] = node;
    return node;
  }

  // --- life ---------------------------------------------------------------------------------

  async start(): Promise<void> {
    await this.refresh();
    void this.watch();
    this.restartCards();
  }

  close(): void {
    this.abort.abort();
    this.cardsAbort?.abort();
  }

  /** Whether the feed or a command told of a version the view does not hold yet. */
  private get behind(): boolean {
    return !this.view || this.view.version < this.known;
  }

  /** Reads the view: at once when `force`, else only when it is behind what the page heard.
   * One GetTable at most is in flight; asks made meanwhile are served by one more read, and
   * only if that read is still needed (a view read after a record already holds it). */
  private refresh(force = true): Promise<void> {
    if (force) this.forceRead = true;
    if (!this.reading && (this.forceRead || this.behind)) {
      // (The loop awaits a read before it can end, so `reading` is cleared after it is set.)
      this.reading = (async () => {
        try {
          while ((this.forceRead || this.behind) && !this.abort.signal.aborted) {
            this.forceRead = false;
            if (!(await this.read())) break;  // a failed read is not repeated at once
          }
        } finally {
          this.reading = null;
        }
      })();
    }
    return this.reading ?? Promise.resolve();
  }

  private async read(): Promise<boolean> {
    try {
      const view = await this.host.api.table.getTable({ tableId: this.tableId }, { signal: this.abort.signal });
      const wasSeated = this.view?.viewerSeat ?? 0;
      this.view = view;
      if (view.version > this.known) this.known = view.version;
      for (const seat of view.seats) this.names.set(seat.seat, seat.playerId);
      if (this.lastSeq === 0n) this.lastSeq = view.version;
      if (view.viewerSeat && !wasSeated) this.restartCards();
      if (view.viewerSeat) void this.commitAhead();
      if (view.tournamentId) await this.readTournament(false);
      this.render();
      return true;
    } catch (err) {
      if (!isAbort(err)) this.fail(err, "The table could not be read");
      return false;
    }
  }

  /** The table moved to `version`: the view is read again only if it does not hold it. */
  private heard(version: bigint): void {
    if (version > this.known) this.known = version;
  }

  /** Once the feed is quiet (QUIET_MS after its last record, BURST_MS at most after the
   * first unread one), the view is read if it is behind: an action and the street the
   * driver deals after it (tens of ms apart) are one read. */
  private scheduleRefresh(): void {
    if (!this.behind) return;
    const now = performance.now();
    if (this.refreshTimer === null) this.burstStart = now;
    else window.clearTimeout(this.refreshTimer);
    const wait = Math.max(0, Math.min(QUIET_MS, this.burstStart + BURST_MS - now));
    this.refreshTimer = window.setTimeout(() => {
      this.refreshTimer = null;
      void this.refresh(false);
    }, wait);
  }

  /** WatchTable from the last sequence received, resumed after any drop: none lost, none twice.
   * Batched (issue 35): a message carries what the table had ready, its own record first and
   * the rest in `more`; each is applied alone, in order, as an unbatched watch's would be. */
  private async watch(): Promise<void> {
    let backoff = 200;
    while (!this.abort.signal.aborted) {
      try {
        const stream = this.host.api.table.watchTable(
          { tableId: this.tableId, afterSequence: this.lastSeq, batched: true },
          { signal: this.abort.signal });
        for await (const message of stream) {
          backoff = 200;
          for (const rec of [message, ...message.more]) {
            if (rec.sequence <= this.lastSeq) continue;
            this.lastSeq = rec.sequence;
            this.onRecord(rec);
          }
        }
      } catch (err) {
        if (this.abort.signal.aborted) return;
        const r = refusal(err);
        if ((r.reason === "token_expired" || r.code === "Unauthenticated") && !this.renewed(r.reason)) {
          this.host.onSignInNeeded(r.reason || r.message);
          return;
        }
        if (r.reason === "after_the_end") this.lastSeq = 0n;
        this.setConn(`Reconnecting (${r.reason || r.code})…`);
      }
      await sleep(backoff);
      backoff = Math.min(backoff * 2, 5000);
      await this.refresh();
      this.setConn("");
    }
  }

  private restartCards(): void {
    this.cardsAbort?.abort();
    const ctl = new AbortController();
    this.cardsAbort = ctl;
    void (async () => {
      let backoff = 300;
      while (!ctl.signal.aborted && !this.abort.signal.aborted) {
        if (!this.view?.viewerSeat) return;
        try {
          for await (const cards of this.host.api.dealer.watchMyCards({ tableId: this.tableId }, { signal: ctl.signal })) {
            backoff = 300;
            this.cards.set(cards.handNumber, cards);
            this.renderMine();
          }
        } catch (err) {
          if (ctl.signal.aborted) return;
          const r = refusal(err);
          if (r.code === "Unauthenticated" && !this.renewed(r.reason)) return;
        }
        await sleep(backoff);
        backoff = Math.min(backoff * 2, 5000);
      }
    })();
  }

  /** A stream that ended with its token's expiry is resumed if the page renewed it since. */
  private renewed(reason: string): boolean {
    return reason === "token_expired" && this.host.signedIn();
  }

  private onRecord(rec: TableEventRecord): void {
    this.received.push(rec.sequence);
    this.heard(rec.sequence);
    const e = rec.event;
    if (!e) return;
    if (e.event.case === "playerSeated") this.names.set(e.event.value.seat, e.event.value.playerId);
    const line = eventText(e, (s) => this.who(s));
    if (line) this.addLog(line);
    if (e.event.case === "handStarted") {
      const n = Number(e.event.value.handNumber);
      this.commitments.set(n, e.event.value.cardCommitment);
      void this.openSeed(n);
    } else if (e.event.case === "handEnded") {
      const n = Number(e.event.value.handNumber);
      void this.verify(n);
      void this.showLastHand(n);
    } else if (e.event.case === "playerSeated" || e.event.case === "playerLeft") {
      if (e.event.case === "playerLeft") this.names.delete(e.event.value.seat);
      if (this.view?.tournamentId) void this.readTournament(true);
      this.host.onChanged();
    }
    this.scheduleRefresh();
  }

  private who(seat: number): string {
    const name = this.names.get(seat) ?? this.view?.seats.find((x) => x.seat === seat)?.playerId;
    return name ? `Seat ${seat} (${name})` : `Seat ${seat}`;
  }

  private addLog(line: string): void {
    this.log.push(line);
    if (this.log.length > LOG_LINES) this.log.shift();
    this.els.log.append(el("li", {}, line));
    while (this.els.log.childElementCount > LOG_LINES) this.els.log.firstElementChild?.remove();
    this.els.log.scrollTop = this.els.log.scrollHeight;
  }

  private setConn(text: string): void {
    this.root.dataset.conn = text ? "down" : "up";
    if (text) this.els.status.textContent = text;
    else this.render();
  }

  private fail(err: unknown, what: string): void {
    const r = refusal(err);
    if (r.code === "Unauthenticated") this.host.onSignInNeeded(r.reason || r.message);
    this.els.error.textContent = `${what}: ${refusalText(r)}`;
  }

  // --- commands -------------------------------------------------------------------------------

  private async command(what: string, call: () => Promise<unknown>): Promise<void> {
    if (this.busy) return;
    this.busy = true;
    this.els.error.textContent = "";
    try {
      const answer = await call();
      const version = (answer as { version?: unknown } | undefined)?.version;
      if (typeof version === "bigint" && this.view && version > this.view.version) {
        // Done: the view is read with the records the command appended (and the street
        // the driver may deal after them); its buttons are stale meanwhile.
        this.heard(version);
        this.els.actions.replaceChildren();
        this.scheduleRefresh();
      } else if (typeof version !== "bigint") {
        await this.refresh();
      }
    } catch (err) {
      this.fail(err, `${what} refused`);
      await this.refresh();  // nothing changed, but the page may have acted on a stale view
    } finally {
      this.busy = false;
    }
  }

  private act(a: LegalAction): Promise<void> {
    const base = { tableId: this.tableId, commandId: commandId(), seat: this.view!.viewerSeat };
    const t = this.host.api.table;
    const name = actionLabel(a);
    switch (a.kind) {
      case ActionKind.FOLD: return this.command(name, () => t.fold(base));
      case ActionKind.CHECK: return this.command(name, () => t.check(base));
      case ActionKind.CALL: return this.command(name, () => t.call(base));
      case ActionKind.BRING_IN: return this.command(name, () => t.postBringIn(base));
      case ActionKind.COMPLETE: return this.command(name, () => t.complete({ ...base, to: a.to }));
      case ActionKind.BET: return this.command(name, () => t.bet({ ...base, to: a.to }));
      case ActionKind.RAISE: return this.command(name, () => t.raise({ ...base, to: a.to }));
      default: return Promise.resolve();
    }
  }

  // --- seeds and the deal check (libs/studclient/fairness.py HandVerifier) --------------------

  private async commitAhead(): Promise<void> {
    const v = this.view;
    if (!v || !v.viewerSeat) return;
    const started = Number(v.handsStarted);
    for (let n = started + 1; n <= started + AHEAD; n++) {
      if (this.seeds.has(n)) continue;
      const seed = crypto.getRandomValues(new Uint8Array(32));
      this.seeds.set(n, { seed, committed: false, opened: false, refused: "" });
      try {
        const commitment = await V.seedCommitment(this.tableId, n, this.host.player, seed);
        await this.host.api.dealer.commitSeed({ tableId: this.tableId, handNumber: BigInt(n), commitment });
        this.seeds.set(n, { seed, committed: true, opened: false, refused: "" });
      } catch (err) {
        const r = refusal(err);
        if (r.reason === "seed_too_late") {
          this.seeds.set(n, { seed, committed: false, opened: false, refused: `CommitSeed: ${r.reason}` });
          continue;
        }
        this.seeds.delete(n);
        return;
      }
    }
  }

  private async openSeed(n: number): Promise<void> {
    const own = this.seeds.get(n);
    if (own && own.committed) {
      try {
        await this.host.api.dealer.openSeed({ tableId: this.tableId, handNumber: BigInt(n), seed: own.seed });
        this.seeds.set(n, { ...own, opened: true });
      } catch (err) {
        this.seeds.set(n, { ...own, opened: false, refused: `OpenSeed: ${refusal(err).reason}` });
      }
    }
    if (this.view?.viewerSeat) await this.commitAhead();
  }

  /** Checks hand `n` as fairness.verify_hand_alone does, and shows the verdict. */
  private async verify(n: number): Promise<void> {
    let verdict: V.Verdict;
    try {
      verdict = await this.verifyHand(n);
    } catch (err) {
      const r = refusal(err);
      verdict = { hand: n, outcome: "failed", problems: [`the hand could not be checked: ${r.code} ${r.reason || r.message}`],
                  ownCards: 0, publicCards: 0, seeds: 0, mySeedUsed: false, seedChecked: true, mySeedListed: false, seedNote: "" };
    }
    this.cards.delete(BigInt(n - 2));
    this.seeds.delete(n);
    this.commitments.delete(n);
    const node = this.els.check;
    node.textContent = V.summary(verdict);
    node.dataset.outcome = verdict.outcome;
    node.dataset.hand = String(n);
    node.title = verdict.problems.join("\n");
    if (verdict.outcome !== "verified") this.addLog(`Deal check: ${V.summary(verdict)}`);
  }

  private async verifyHand(n: number): Promise<V.Verdict> {
    const api = this.host.api;
    const hand = BigInt(n);
    const seen = this.commitments.get(n) ?? null;
    const seed = this.seeds.get(n) ?? null;
    const history = await api.table.getHandHistory({ tableId: this.tableId, handNumber: hand });
    const view = this.view ?? await api.table.getTable({ tableId: this.tableId });
    let raw;
    for (let attempt = 0; attempt < 20; attempt++) {
      try {
        raw = await api.dealer.getHandProof({ tableId: this.tableId, handNumber: hand });
      } catch (err) {
        const r = refusal(err);
        if (r.reason === "no_card_commitment" && seen) {
          return { hand: n, outcome: "failed", problems: ["the dealer says the hand has no per-card commitment, but its HandStarted carried one"],
                   ownCards: 0, publicCards: 0, seeds: 0, mySeedUsed: false, seedChecked: true, mySeedListed: false, seedNote: "" };
        }
        if (r.reason === "no_card_commitment") return V.withoutCommitment(n, seed);
        throw err;
      }
      if (raw.complete || !history.complete) break;
      await sleep(50 * (attempt + 1));
    }
    let proof: V.HandProof;
    try {
      const h = raw!.header;
      const header: V.DealHeader = { table: raw!.tableId, hand: Number(raw!.handNumber), root: h?.root ?? "",
                                     dealerSeed: h?.dealerSeedCommitment ?? "", seeds: (h?.seeds ?? []).map((s) => [s.playerId, s.commitment]) };
      V.checkHeader(header);
      const openings: { draw: number; opening: V.Opening }[] = [];
      for (const o of raw!.openings) {
        const op = openingOf(o);
        if (op) openings.push({ draw: o.draw, opening: op });
      }
      proof = { header, openings, complete: raw!.complete, dealerSeed: raw!.complete ? raw!.dealerSeed : null,
                seeds: raw!.seeds.map((s) => [s.playerId, s.withheld ? null : s.seed]) };
      if (proof.dealerSeed !== null && proof.dealerSeed.length !== 32) throw new Error("a seed is 32 bytes");
      for (const [, s] of proof.seeds) if (s !== null && s.length !== 32) throw new Error("a seed is 32 bytes");
    } catch (err) {
      return { hand: n, outcome: "failed", problems: [`the dealer's proof is malformed: ${(err as Error).message}`],
               ownCards: 0, publicCards: 0, seeds: 0, mySeedUsed: false, seedChecked: true, mySeedListed: false, seedNote: "" };
    }
    let cards = this.cards.get(hand) ?? null;
    if (cards === null) {
      try {
        cards = await api.dealer.getMyCards({ tableId: this.tableId, handNumber: hand });
      } catch (err) {
        if (refusal(err).reason !== "not_dealt_in") throw err;
      }
    }
    const mine: V.OwnCards | null = cards === null ? null : {
      seat: cards.seat, down: cards.down.map(cardIndex), openings: cards.downOpenings.map(openingOf) };
    return V.verifyMine({ table: this.tableId, player: this.host.player, events: history.events.map((r) => dealEvent(r.event)),
                          burnCards: view.config?.burnCards ?? false, proof, mine, seed, seenCommitment: seen, seedKnown: true });
  }

  private async showLastHand(n: number): Promise<void> {
    try {
      const h = await this.host.api.table.getHandHistory({ tableId: this.tableId, handNumber: BigInt(n) });
      const lines = h.events.map((r) => (r.event ? eventText(r.event, (s) => this.who(s)) : "")).filter(Boolean);
      const list = el("ol", {}, ...lines.map((l) => el("li", {}, l)));
      const result = h.result?.seats.map((s) => {
        const net = Number(s.stackEnd - s.stackStart);
        return el("li", {}, `Seat ${s.seat} (${s.playerId}): ${chips(s.stackStart)} → ${chips(s.stackEnd)} (${net >= 0 ? "+" : ""}${chips(net)})`);
      }) ?? [];
      this.els.last.replaceChildren(el("h3", {}, `Hand ${n}`), list, el("ul", { class: "result" }, ...result));
    } catch {
      /* the history is shown when it can be read */
    }
  }

  // --- tournaments ----------------------------------------------------------------------------

  private async readTournament(force: boolean): Promise<void> {
    const id = this.view?.tournamentId;
    if (!id) return;
    const now = Date.now();
    if (!force && now - this.lastTournamentRead < 1000) return;
    this.lastTournamentRead = now;
    try {
      this.tournament = await this.host.api.tournament.getTournament({ tournamentId: id });
    } catch {
      return;
    }
    const me = this.tournament.entries.filter((e) => e.playerId === this.host.player && e.place === 0).at(-1);
    if (me && me.tableId && me.tableId !== this.tableId && !me.movingToTable) this.host.onMoved(this.tableId, me.tableId);
    else if (me && me.movingToTable && me.movingToTable !== this.tableId && me.tableId !== this.tableId) {
      this.host.onMoved(this.tableId, me.movingToTable);
    }
  }

  private renderTournament(): void {
    const t = this.tournament;
    const node = this.els.tourney;
    const rail = this.els.rail;
    if (!t || !this.view?.tournamentId) {
      node.hidden = true;
      rail.hidden = true;
      return;
    }
    node.hidden = false;
    const clock = t.clock;
    const left = t.entries.filter((e) => e.place === 0).length;
    let text = `${t.config?.name || t.tournamentId}: `;
    if (t.phase === TournamentPhase.FINISHED) text += `finished, won by ${t.entries.find((e) => e.entryId === t.winner)?.playerId ?? t.winner}`;
    else if (clock) {
      const ends = clock.endsAt ? (timestampMs(clock.endsAt) - Date.now()) / 1000 : 0;
      const s = clock.stakes;
      text += `${clock.onBreak ? "break after level" : "level"} ${clock.level}` +
        (s ? `, stakes ${chips(s.smallBet)}/${chips(s.bigBet)} ante ${chips(s.ante)} bring-in ${chips(s.bringIn)}` : "") +
        `, ${countdown(ends)} left; ${left} of ${t.entries.length} players left`;
    }
    if (t.handForHand) text += "; hand for hand";
    node.textContent = text;
    const me = t.entries.filter((e) => e.playerId === this.host.player).at(-1);
    const places = t.entries.filter((e) => e.place > 0).sort((a, b) => a.place - b.place);
    rail.hidden = false;
    rail.replaceChildren(
      el("h3", {}, "Places"),
      el("ol", { class: "places", "aria-label": "Places" }, ...places.map((e) =>
        el("li", {}, `${e.place}${e.placeTo > e.place ? `-${e.placeTo}` : ""}. ${e.playerId}` +
          (e.prize > 0n ? ` wins ${chips(e.prize)}` : "")))),
      el("p", { class: "me" }, me ? (me.place > 0 ? `You finished ${me.place}${me.placeTo > me.place ? `-${me.placeTo}` : ""}${me.prize > 0n ? `, prize ${chips(me.prize)}` : ""}`
                                                  : `Your chips: ${chips(me.chips)}`) : "You are watching"),
    );
  }

  // --- rendering ------------------------------------------------------------------------------

  tick(): void {
    const v = this.view;
    const hand = v?.hand;
    if (!v || !hand || !hand.toAct || hand.phase === HandPhase.COMPLETE || !hand.turnDeadline) {
      this.els.clock.textContent = "";
    } else {
      this.tickClock(hand.toAct, hand.turnDeadline, hand.timeBankMs);
    }
    if (this.view?.tournamentId) {
      // the tournament moves on between the table's events (a bust's place, the end, a move)
      if (this.tournament?.phase !== TournamentPhase.FINISHED) void this.readTournament(false);
      this.renderTournament();
    }
  }

  private tickClock(toAct: number, deadline: Timestamp, bankMs: bigint): void {
    const left = (timestampMs(deadline) - Date.now()) / 1000;
    const bank = Number(bankMs) / 1000;
    const action = Math.max(0, left - bank);
    this.els.clock.textContent = action > 0
      ? `${this.who(toAct)} to act: ${countdown(action)}, time bank ${countdown(bank)}`
      : `${this.who(toAct)} on the time bank: ${countdown(left)}`;
  }

  private render(): void {
    const v = this.view;
    if (!v) return;
    if (!performance.getEntriesByName("stud-first-view").length) performance.mark("stud-first-view");
    const hand = v.hand;
    const live = !!hand && hand.phase !== HandPhase.COMPLETE;
    const stakes = v.config ? `${chips(v.config.smallBet)}/${chips(v.config.bigBet)}` : "";
    let status = `Stakes ${stakes}`;
    if (hand) status += ` · Hand ${hand.handNumber}${live ? ` · ${streetText(hand.street)}` : " (over)"}`;
    if (live && hand!.toAct) status += ` · ${this.who(hand!.toAct)} to act`;
    if (v.dealingPaused) status += ` · paused${v.pauseReason ? ` (${v.pauseReason})` : ""}`;
    if (v.statusReason) status += ` · ${v.statusReason}`;
    if (!live && !v.dealingPaused) status += v.seats.length < 2 ? " · waiting for players" : "";
    if (this.root.dataset.conn !== "down") this.els.status.textContent = status;
    this.renderSeats(v);
    this.renderPot(v);
    this.renderMine();
    this.renderActions(v);
    this.renderControls(v);
    this.renderTournament();
    this.tick();
  }

  private renderSeats(v: TableView): void {
    const count = v.config?.seats || 8;
    const hand = v.hand;
    const live = !!hand && hand.phase !== HandPhase.COMPLETE;
    const nodes: HTMLElement[] = [];
    for (let n = 1; n <= count; n++) {
      const seat = v.seats.find((s) => s.seat === n);
      const p = hand?.players.find((x) => x.seat === n);
      const region = el("section", { class: "seat", role: "region", "aria-label": `Seat ${n}`, "data-seat": String(n) });
      if (!seat) {
        region.classList.add("empty");
        region.append(el("span", { class: "name" }, `Seat ${n}: empty`));
        nodes.push(region);
        continue;
      }
      if (seat.playerId === this.host.player) region.classList.add("me");
      if (live && hand!.toAct === n) region.classList.add("to-act");
      const flags: string[] = [];
      if (p?.folded) flags.push("folded");
      if (p?.allIn) flags.push("all-in");
      if (p?.exposed) flags.push("exposed");
      if (p?.shown) flags.push("shown");
      if (p?.mucked) flags.push("mucked");
      if (seat.sittingOut) flags.push("sitting out");
      if (seat.leaving) flags.push("leaving");
      if (live && hand!.toAct === n) flags.push("to act");
      region.append(
        el("span", { class: "name" }, seat.playerId),
        el("span", { class: "stack", "aria-label": "Stack" }, chips(seat.stack)),
        el("span", { class: "wager", "aria-label": "Wager" }, p && p.streetTotal > 0n ? chips(p.streetTotal) : ""),
        el("span", { class: "flags" }, flags.join(", ")),
      );
      if (p) {
        const cards = el("span", { class: "cards" });
        for (const d of p.down) cards.append(d.card ? cardNode(d.card) : cardNode(undefined));
        const up = el("span", { class: "up", "aria-label": "Up cards" }, ...p.up.map((c) => cardNode(c)));
        region.append(cards, up);
      }
      nodes.push(region);
    }
    this.els.seats.replaceChildren(...nodes);
  }

  private renderPot(v: TableView): void {
    const hand = v.hand;
    const pots = hand?.pots ?? [];
    const total = pots.reduce((a, p) => a + p.amount, 0n);
    let text = `Pot ${chips(total)}`;
    if (pots.length > 1) text += ` (main ${chips(pots[0].amount)}` + pots.slice(1).map((p, i) => `, side ${i + 1}: ${chips(p.amount)}`).join("") + ")";
    if (hand && hand.phase === HandPhase.COMPLETE && hand.awards.length) {
      text = hand.awards.map((a) => `${this.who(a.seat)} wins ${chips(a.amount)}${a.hand ? ` with ${a.hand}` : ""}`).join("; ");
    }
    this.els.pot.textContent = text;
  }

  private renderMine(): void {
    const v = this.view;
    const node = this.els.mine;
    if (!v || !v.viewerSeat || !v.hand) {
      node.replaceChildren();
      node.hidden = true;
      return;
    }
    node.hidden = false;
    node.dataset.hand = String(v.hand.handNumber);
    const mine = this.cards.get(v.hand.handNumber);
    const down = mine && mine.seat === v.viewerSeat ? mine.down : [];
    node.replaceChildren(el("span", { class: "label" }, "Your cards: "), ...down.map((c) => cardNode(c, "card mine")));
  }

  private renderActions(v: TableView): void {
    const node = this.els.actions;
    const la = v.hand?.legalActions;
    if (!v.viewerSeat || !la || la.seat !== v.viewerSeat || v.hand?.toAct !== v.viewerSeat) {
      node.replaceChildren();
      return;
    }
    node.replaceChildren(...la.actions.map((a) => {
      const b = el("button", { type: "button", class: `act k${a.kind}` }, actionLabel(a));
      b.onclick = () => void this.act(a);
      return b;
    }));
  }

  private renderControls(v: TableView): void {
    const node = this.els.controls;
    const key = JSON.stringify([v.viewerSeat, v.seats.map((s) => [s.seat, s.sittingOut, s.leaving]), v.muckPreference, !!v.tournamentId]);
    if (node.dataset.key === key) return;
    node.dataset.key = key;
    const t = this.host.api.table;
    const base = () => ({ tableId: this.tableId, commandId: commandId(), seat: v.viewerSeat });
    if (v.tournamentId) {
      node.replaceChildren();
      return;
    }
    const bigBet = Number(v.config?.bigBet ?? 0n);
    const min = Number(v.settings?.buyInMin ?? 0n);
    const max = Number(v.settings?.buyInMax ?? 0n);
    const suggest = Math.max(min, Math.min(max || Infinity, 50 * bigBet)) || 1000;
    if (!v.viewerSeat) {
      const free = [];
      for (let n = 1; n <= (v.config?.seats || 8); n++) if (!v.seats.some((s) => s.seat === n)) free.push(n);
      if (!free.length) {
        node.replaceChildren(el("p", {}, "The table is full: you are watching."));
        return;
      }
      const select = el("select", { "aria-label": "Seat" }, ...free.map((n) => el("option", { value: String(n) }, `Seat ${n}`)));
      const amount = el("input", { type: "number", min: String(min), max: String(max), value: String(suggest), "aria-label": "Buy-in", inputmode: "numeric" });
      const sit = el("button", { type: "button" }, "Sit down");
      sit.onclick = () => void this.command("Sit down", () =>
        t.sitDown({ tableId: this.tableId, commandId: commandId(), seat: Number(select.value), buyIn: BigInt(Math.floor(Number(amount.value) || 0)) }));
      node.replaceChildren(el("label", {}, "Seat ", select), el("label", {}, "Buy-in ", amount), sit,
                           el("span", { class: "hint" }, ` (${chips(min)} to ${chips(max)})`));
      return;
    }
    const me = v.seats.find((s) => s.seat === v.viewerSeat);
    const topUp = el("input", { type: "number", min: "1", value: String(suggest), "aria-label": "Top-up amount", inputmode: "numeric" });
    const top = el("button", { type: "button" }, "Top up");
    top.onclick = () => void this.command("Top up", () => t.addChips({ ...base(), amount: BigInt(Math.floor(Number(topUp.value) || 0)) }));
    const inOut = el("button", { type: "button" }, me?.sittingOut ? "Sit in" : "Sit out");
    inOut.onclick = () => void this.command(inOut.textContent!, () => (me?.sittingOut ? t.sitIn(base()) : t.sitOut(base())));
    const leave = el("button", { type: "button" }, me?.leaving ? "Leaving after this hand" : "Leave seat");
    leave.onclick = () => void this.command("Leave seat", () => t.leaveSeat(base()));
    const muck = el("input", { type: "checkbox" });
    muck.checked = v.muckPreference;
    muck.onchange = () => void this.command("Muck preference", () => t.setMuckPreference({ ...base(), muck: muck.checked }));
    node.replaceChildren(el("span", {}, topUp, top), inOut, leave, el("label", {}, muck, " Muck losing hands"));
  }

  /** The table's view (the tests read it through window.stud). */
  get current(): TableView | null {
    return this.view;
  }
}

function openingOf(o: { position: number; card?: { rank: number; suit: number }; salt: Uint8Array; path: Uint8Array[] }): V.Opening | null {
  if (!o.salt.length) return null;
  const card = cardIndex(o.card as never);
  if (!o.card || o.card.rank < 2 || o.card.rank > 14 || o.card.suit < 1 || o.card.suit > 4) return null;
  return { position: o.position, card, salt: o.salt, path: o.path };
}

/** A record's event as the deal rule reads it. */
export function dealEvent(e: TableEvent | undefined): V.DealEvent {
  const c = e?.event;
  switch (c?.case) {
    case "handStarted": return { kind: "started", hand: Number(c.value.handNumber), seats: [...c.value.seats], cardCommitment: c.value.cardCommitment };
    case "downCardDealt": return { kind: "down", seat: c.value.seat, street: c.value.street };
    case "upCardDealt": return { kind: "up", seat: c.value.seat, street: c.value.street, card: cardIndex(c.value.card) };
    case "communityCardDealt": return { kind: "community", card: cardIndex(c.value.card) };
    case "cardBurned": return { kind: "burn" };
    case "burnsReshuffled": return { kind: "reshuffle" };
    case "folded": return { kind: "folded", seat: c.value.seat };
    case "handExposed": return { kind: "exposed", seat: c.value.seat, down: c.value.down.map(cardIndex) };
    case "handShown": return { kind: "shown", seat: c.value.seat, down: c.value.down.map(cardIndex) };
    default: return { kind: "other" };
  }
}

