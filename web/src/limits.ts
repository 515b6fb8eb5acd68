// The player's protection (docs/player-protection.md): limits with what is left and when the
// window frees some, a raise waiting for its 24 hours, the session limit, reality checks and
// self-exclusion (asked twice). The wallet decides everything; the page shows its answer.
import { isAbort, refusal, refusalText, when, type Api } from "./api";
import { ExclusionPeriod, LimitKind, LimitWindow, type ProtectionResponse } from "./gen/stud/v1/wallet_pb";
import { chips } from "./words";

const KINDS: [string, LimitKind][] = [["wager", LimitKind.WAGER], ["loss", LimitKind.LOSS], ["deposit", LimitKind.DEPOSIT]];
const WINDOWS: [string, LimitWindow][] = [["day", LimitWindow.DAY], ["week", LimitWindow.WEEK], ["month", LimitWindow.MONTH]];
const PERIODS: [string, ExclusionPeriod][] = [["a day", ExclusionPeriod.DAY], ["a week", ExclusionPeriod.WEEK],
  ["a month", ExclusionPeriod.MONTH], ["six months", ExclusionPeriod.SIX_MONTHS], ["indefinitely", ExclusionPeriod.INDEFINITE]];
const kindName = (k: LimitKind) => KINDS.find(([, v]) => v === k)?.[0] ?? "?";
const windowName = (w: LimitWindow) => WINDOWS.find(([, v]) => v === w)?.[0] ?? "?";

function el<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Record<string, string> = {},
                                                   ...children: (Node | string)[]): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  node.append(...children);
  return node;
}

function select<T extends number>(label: string, options: [string, T][]): HTMLSelectElement {
  const s = el("select", { "aria-label": label });
  for (const [name, value] of options) s.append(el("option", { value: String(value) }, name));
  return s;
}

function number(label: string, min: string): HTMLInputElement {
  return el("input", { type: "number", min, step: "1", "aria-label": label });
}

/** A reminder in words (studclient.protection.reality_check_text). */
export function realityCheckText(sessionMs: bigint, net: bigint): string {
  const minutes = Math.floor(Number(sessionMs) / 60_000);
  const sign = net > 0n ? "+" : "";
  return `Reality check: you have played ${Math.floor(minutes / 60)} h ${String(minutes % 60).padStart(2, "0")} min ` +
    `this session; net result ${sign}${chips(net)}.`;
}

export class LimitsPane {
  readonly root: HTMLElement;
  private readonly error = el("p", { class: "error", role: "alert" });
  private readonly exclusion = el("p", { role: "status", "aria-label": "Exclusion" });
  private readonly rows = el("tbody");
  private readonly session = el("p", { "aria-label": "Session and reality check" });
  private readonly confirm = el("div", { role: "group", "aria-label": "Confirm self-exclusion", hidden: "" });
  private watching: AbortController | undefined;

  constructor(private readonly api: Api, private readonly player: string,
              private readonly notice: (text: string) => void,
              private readonly signedIn: () => boolean = () => false) {
    const kind = select("Limit kind", KINDS);
    const window = select("Limit window", WINDOWS);
    const amount = number("Limit amount", "0");
    const setLimit = el("button", { type: "button" }, "Set limit");
    setLimit.onclick = () => void this.call("Set limit", () => api.wallet.setLimit({ playerId: player,
      kind: Number(kind.value), window: Number(window.value), amount: BigInt(Math.floor(Number(amount.value) || 0)) }));

    const minutes = number("Session limit in minutes", "0");
    const setSession = el("button", { type: "button" }, "Set session limit");
    setSession.onclick = () => void this.call("Set session limit", () => api.wallet.setSessionLimit({ playerId: player,
      minutes: Math.floor(Number(minutes.value) || 0) }));

    const interval = number("Reality check every (minutes)", "0");
    const setCheck = el("button", { type: "button" }, "Set reality check");
    setCheck.onclick = () => void this.call("Set reality check", () => api.wallet.setRealityCheck({ playerId: player,
      intervalMinutes: Math.floor(Number(interval.value) || 0) }));

    const period = select("Exclusion period", PERIODS);
    const exclude = el("button", { type: "button" }, "Self-exclude");
    const question = el("p", {});
    const yes = el("button", { type: "button" }, "Confirm self-exclusion");
    const no = el("button", { type: "button" }, "Keep playing");
    this.confirm.append(question, yes, no);
    exclude.onclick = () => {
      const chosen = period.selectedOptions[0]?.textContent ?? "";
      question.textContent = `Exclude yourself from play ${chosen === "indefinitely" ? "indefinitely (until an operator lifts it, after six months at least)" : `for ${chosen}`}? ` +
        "Nobody can lift it early, and you cannot take a seat or enter a tournament until it ends.";
      this.confirm.hidden = false;
      yes.focus();
    };
    no.onclick = () => { this.confirm.hidden = true; };
    yes.onclick = () => {
      this.confirm.hidden = true;
      void this.call("Self-exclusion", () => api.wallet.selfExclude({ playerId: player, period: Number(period.value) }));
    };

    this.root = el("section", { id: "limits", class: "limits", "aria-label": "Limits", hidden: "" },
      el("h2", {}, "Limits"),
      this.error, this.exclusion,
      el("table", { "aria-label": "Your limits" },
        el("caption", {}, "Your limits"),
        el("thead", {}, el("tr", {}, ...["Limit", "Amount", "Used", "Left", "Frees some at", "Raise", ""].map(
          (h) => el("th", { scope: "col" }, h)))),
        this.rows),
      el("div", { class: "controls", role: "group", "aria-label": "Set a limit" }, kind, window, amount, setLimit),
      el("p", { class: "hint" }, "A first or lower limit applies at once; a higher one, or none, 24 hours later."),
      this.session,
      el("div", { class: "controls", role: "group", "aria-label": "Session" }, minutes, setSession, interval, setCheck),
      el("div", { class: "controls", role: "group", "aria-label": "Take a break" }, period, exclude),
      this.confirm);
  }

  async show(): Promise<void> {
    this.root.hidden = false;
    await this.refresh();
  }

  hide(): void {
    this.root.hidden = true;
  }

  async refresh(): Promise<void> {
    try {
      this.render(await this.api.wallet.getProtection({ playerId: this.player }));
    } catch (err) {
      this.error.textContent = `Your limits could not be read: ${refusalText(refusal(err))}`;
    }
  }

  private async call(what: string, send: () => Promise<ProtectionResponse>): Promise<void> {
    this.error.textContent = "";
    try {
      this.render(await send());
    } catch (err) {
      this.error.textContent = `${what} refused: ${refusalText(refusal(err))}`;
    }
  }

  /** The wallet's answer; reality checks are watched from the first answer that has them on,
   * whether the section is open or not (main reads it at load). */
  render(p: ProtectionResponse): void {
    if (p.excluded) {
      const until = p.excludedUntilMs === 0n ? "until an operator lifts it" : `until ${when(p.excludedUntilMs)}`;
      const by = p.excludedBy ? ` by ${p.excludedBy} (${p.exclusionReason})` : " (self-excluded)";
      this.exclusion.textContent = `You are excluded from play ${until}${by}.` +
        (p.liftEffectiveMs ? ` Lifted from ${when(p.liftEffectiveMs)}.` : "");
    } else {
      this.exclusion.textContent = "You are not excluded from play.";
    }
    const rows = p.limits.map((l) => {
      const name = `${kindName(l.kind)} per ${windowName(l.window)}`;
      const cell = el("td", {});
      if (l.increasePending) {
        const target = l.pendingAmount ? chips(l.pendingAmount) : "no limit";
        cell.append(`Raise to ${target} waiting 24 h: from ${when(l.pendingEffectiveMs)}`);
      }
      const action = el("td", {});
      if (l.increasePending) {
        const cancel = el("button", { type: "button" }, `Cancel the raise of the ${name} limit`);
        cancel.onclick = () => void this.call("Cancel raise", () => this.api.wallet.cancelLimitIncrease({
          playerId: this.player, kind: l.kind, window: l.window }));
        action.append(cancel);
      }
      return el("tr", { "data-limit": `${kindName(l.kind)}:${windowName(l.window)}` },
        el("th", { scope: "row" }, name),
        el("td", {}, chips(l.amount)),
        el("td", {}, chips(l.used)),
        el("td", {}, chips(l.remaining)),
        el("td", {}, l.used ? when(l.resetsAtMs) : ""),
        cell, action);
    });
    this.rows.replaceChildren(...(rows.length ? rows : [el("tr", {}, el("td", { colspan: "7" }, "No limits set."))]));
    const parts: string[] = [];
    parts.push(p.sessionLimitMinutes ? `Sessions end after ${p.sessionLimitMinutes} minutes` : "No session limit");
    if (p.sessionLimitMinutes && p.sessionStartedMs) parts.push(`this one started ${when(p.sessionStartedMs)}`);
    if (p.sessionLimitPending) {
      const target = p.sessionLimitPendingMinutes ? `${p.sessionLimitPendingMinutes} minutes` : "no session limit";
      parts.push(`raise to ${target} waiting 24 h: from ${when(p.sessionLimitEffectiveMs)}`);
    }
    parts.push(p.realityCheckMinutes ? `a reality check every ${p.realityCheckMinutes} minutes of play` : "no reality checks");
    this.session.textContent = parts.join("; ") + ".";
    if (p.realityCheckMinutes && !this.watching) void this.watch();
  }

  /** WatchRealityChecks while reminders are on: each one a notice with the session's time and
   * net result. The stream ends when they are turned off (or `reality_check_off`). */
  async watch(): Promise<void> {
    if (this.watching) return;
    const abort = new AbortController();
    this.watching = abort;
    let backoff = 1000;
    try {
      while (!abort.signal.aborted) {
        try {
          for await (const check of this.api.wallet.watchRealityChecks({ playerId: this.player }, { signal: abort.signal })) {
            backoff = 1000;
            this.notice(realityCheckText(check.sessionMs, check.netResult));
          }
          return; // turned off
        } catch (err) {
          const r = refusal(err);
          // Resumed after the gateway's drop, or its token's end once the page renewed it.
          if (isAbort(err) || (r.code !== "Unavailable" && !(r.reason === "token_expired" && this.signedIn()))) return;
        }
        await new Promise((r) => setTimeout(r, backoff));
        backoff = Math.min(backoff * 2, 30_000);
      }
    } finally {
      if (this.watching === abort) this.watching = undefined;
    }
  }
}
