// The web client: sign-in from the link's fragment, the lobby (cash tables, tournaments) and
// the open tables. Plain DOM; every control is a button or input with an accessible name.
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { claims, commandId, forgetToken, keepToken, makeApi, refusal, refusalText, renewsTokens, renewToken, takeToken } from "./api";
import { TableStatus, type TableSummary } from "./gen/stud/v1/table_pb";
import { TournamentFormat, TournamentPhase, type TournamentSummary } from "./gen/stud/v1/tournament_pb";
import { LimitsPane } from "./limits";
import { TablePane, type Host } from "./table";
import { chips, countdown } from "./words";

const OPEN_KEY = "stud.open";
const $ = (id: string) => document.getElementById(id)!;

function el<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Record<string, string> = {},
                                                   ...children: (Node | string)[]): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  node.append(...children);
  return node;
}

let token = takeToken();
const api = makeApi(() => token);
const me = claims(token);
const panes = new Map<string, TablePane>();
const myEntries = new Set<string>();
const limits = new LimitsPane(api, me.player, (text) => notice(text), () => signedIn());

function notice(text: string): void {
  $("notice").textContent = text;
}

function signInNeeded(reason: string): void {
  $("signin").hidden = false;
  $("signin").dataset.kind = "refused";
  $("signin").textContent = `Sign-in refused: ${reason.replace(/_/g, " ")}. Open your sign-in link again.`;
}

const host: Host = {
  api,
  player: me.player,
  onSignInNeeded: signInNeeded,
  onMoved(from, to) {
    if (panes.has(to)) return;
    closeTable(from);
    notice(`The tournament moved you from ${from} to ${to}.`);
    void openTable(to);
  },
  onClose: closeTable,
  onChanged: () => void refreshLobby(),
  signedIn: () => signedIn(),
};

function signedIn(): boolean {
  return claims(token).exp - Date.now() / 1000 > 5;
}

function saveOpen(): void {
  localStorage.setItem(OPEN_KEY, JSON.stringify([...panes.keys()]));
}

async function openTable(id: string): Promise<void> {
  if (panes.has(id)) return;
  const pane = new TablePane(host, id);
  panes.set(id, pane);
  $("tables").append(pane.root);
  saveOpen();
  await pane.start();
}

function closeTable(id: string): void {
  const pane = panes.get(id);
  if (!pane) return;
  pane.close();
  pane.root.remove();
  panes.delete(id);
  saveOpen();
}

// --- the lobby ---------------------------------------------------------------------------------

async function lobbyTables(): Promise<void> {
  const tables: TableSummary[] = [];
  let pageToken = "";
  do {
    const page = await api.table.listTables({ pageSize: 200, pageToken });
    tables.push(...page.tables);
    pageToken = page.nextPageToken;
  } while (pageToken && tables.length < 1000);
  const cash = tables.filter((t) => !t.tournamentId && t.status !== TableStatus.CLOSED);
  const rows = cash.map((t) => {
    const seats = t.config?.seats || 8;
    const open = el("button", { type: "button" }, `Open ${t.tableId}`);
    open.onclick = () => void openTable(t.tableId);
    return el("tr", { "data-table": t.tableId },
      el("th", { scope: "row" }, t.tableId),
      el("td", {}, t.config ? `${chips(t.config.smallBet)}/${chips(t.config.bigBet)}` : ""),
      el("td", {}, `${t.seatsTaken} of ${seats} taken, ${seats - t.seatsTaken} free`),
      el("td", {}, t.players.join(", ") || "nobody"),
      el("td", {}, open));
  });
  $("cash").replaceChildren(...(rows.length ? rows : [el("tr", {}, el("td", { colspan: "5" }, "No cash table is open."))]));
}

const FORMATS: Record<number, string> = { [TournamentFormat.SIT_AND_GO]: "Sit & go", [TournamentFormat.MULTI_TABLE]: "Multi-table" };
const PHASES: Record<number, string> = { [TournamentPhase.REGISTERING]: "registering", [TournamentPhase.RUNNING]: "running",
  [TournamentPhase.FINISHED]: "finished", [TournamentPhase.CANCELLED]: "cancelled" };

async function tournamentCommand(what: string, call: () => Promise<unknown>): Promise<void> {
  $("lobby-error").textContent = "";
  try {
    await call();
  } catch (err) {
    $("lobby-error").textContent = `${what} refused: ${refusalText(refusal(err))}`;
  }
  await refreshLobby();
}

async function lobbyTournaments(): Promise<void> {
  const list: TournamentSummary[] = [];
  let pageToken = "";
  do {
    const page = await api.tournament.listTournaments({ pageSize: 200, pageToken });
    list.push(...page.tournaments);
    pageToken = page.nextPageToken;
  } while (pageToken && list.length < 1000);
  const rows = list.filter((t) => t.phase !== TournamentPhase.CANCELLED || myEntries.has(t.tournamentId)).map((t) => {
    const cell = el("td", {});
    const id = t.tournamentId;
    if (t.registrationOpen) {
      const reg = el("button", { type: "button" }, `Register for ${t.name || id}`);
      reg.onclick = () => void tournamentCommand("Register", async () => {
        await api.tournament.register({ tournamentId: id, commandId: commandId() });
        myEntries.add(id);
      });
      const unreg = el("button", { type: "button" }, `Unregister from ${t.name || id}`);
      unreg.onclick = () => void tournamentCommand("Unregister", async () => {
        await api.tournament.unregister({ tournamentId: id, commandId: commandId() });
        myEntries.delete(id);
      });
      cell.append(reg, unreg);
    }
    if (t.phase === TournamentPhase.RUNNING || t.phase === TournamentPhase.FINISHED) {
      const watch = el("button", { type: "button" }, `Go to ${t.name || id}`);
      watch.onclick = () => void goToTournament(id);
      cell.append(watch);
    }
    const start = t.startAt ? ` · starts in ${countdown((timestampMs(t.startAt) - Date.now()) / 1000)}` : "";
    return el("tr", { "data-tournament": id },
      el("th", { scope: "row" }, t.name || id),
      el("td", {}, FORMATS[t.format] ?? ""),
      el("td", {}, `${chips(t.buyIn)} + ${chips(t.fee)}`),
      el("td", {}, (PHASES[t.phase] ?? "") + (t.phase === TournamentPhase.REGISTERING ? start : "")),
      el("td", {}, `${t.entries} entries, ${t.playersLeft} left`),
      cell);
  });
  $("tournaments").replaceChildren(...(rows.length ? rows : [el("tr", {}, el("td", { colspan: "6" }, "No tournament."))]));
}

/** The player's table in a tournament, or (not in it, or out) the chip leader's: the rail. */
async function goToTournament(id: string): Promise<void> {
  try {
    const t = await api.tournament.getTournament({ tournamentId: id });
    const mine = t.entries.filter((e) => e.playerId === me.player && e.place === 0).at(-1);
    let table = mine?.tableId;
    if (!table) {
      const leader = [...t.entries].filter((e) => e.place === 0 && e.tableId).sort((a, b) => Number(b.chips - a.chips))[0];
      table = leader?.tableId ?? t.tables[0]?.tableId;
    }
    if (table) await openTable(table);
    else notice(`${t.config?.name || id} has no table open.`);
  } catch (err) {
    $("lobby-error").textContent = `The tournament could not be read: ${refusalText(refusal(err))}`;
  }
}

async function balance(): Promise<void> {
  try {
    const b = await api.wallet.getBalance({ account: { account: { case: "playerId", value: me.player } } });
    $("balance").textContent = `Wallet ${chips(b.balance)}`;
  } catch {
    $("balance").textContent = "";
  }
}

/** How often the lobby is read while the page is shown (no lobby stream exists: the tables
 * and tournaments are listed a page at a time). */
const LOBBY_EVERY_MS = 5000;
let lobbyReading: Promise<void> | null = null;
let lobbyAgain = false;
let lobbyTimer: number | undefined;

/** Reads the lobby: one read at a time; asked again meanwhile, once more after it. */
function refreshLobby(): Promise<void> {
  if (lobbyReading) {
    lobbyAgain = true;
    return lobbyReading;
  }
  lobbyReading = (async () => {
    try {
      do {
        lobbyAgain = false;
        await readLobby();
      } while (lobbyAgain);
    } finally {
      lobbyReading = null;
    }
  })();
  return lobbyReading;
}

/** The lobby's timer: every LOBBY_EVERY_MS while the page is shown; a hidden tab is not
 * read, and is read at once (the timer started again) when it is shown. */
function pollLobby(): void {
  window.clearInterval(lobbyTimer);
  lobbyTimer = window.setInterval(() => {
    if (document.visibilityState !== "hidden") void refreshLobby();
  }, LOBBY_EVERY_MS);
}

async function readLobby(): Promise<void> {
  try {
    await Promise.all([lobbyTables(), lobbyTournaments(), balance()]);
    $("lobby-error").textContent = "";
  } catch (err) {
    const r = refusal(err);
    if (r.code === "Unauthenticated") signInNeeded(r.reason || r.message);
    $("lobby-error").textContent = `The lobby could not be read: ${refusalText(r)}`;
  }
}

/** Renewed this long before the token ends (or a third of its life, if shorter). */
const RENEW_BEFORE_S = 300;
/** Said this long before the token ends when it could not be renewed. */
const WARN_BEFORE_S = 120;
/** "asking": whether the room renews, not known yet; "": renewable; "renewing"; "unavailable";
 * else the reason a renewal was refused. */
let renewal: "" | "asking" | "renewing" | "unavailable" | string = "asking";
let renewedFrom = "";
let nextRenewal = 0;

/** Every second: the token renewed before it ends where the room renews tokens (make run's
 * /auth/renew), else the player told, two minutes ahead, to sign in again. */
function tokenClock(): void {
  const c = claims(token);
  if (!c.exp) return;
  const now = Date.now() / 1000;
  const left = c.exp - now;
  if (left <= 0) {
    signInNeeded("token_expired");
    return;
  }
  if (renewedFrom && renewedFrom !== token) renewal = "";  // a new token (renewed, another tab)
  const life = c.iat ? c.exp - c.iat : 3600;
  if (left < Math.min(RENEW_BEFORE_S, life / 3) && renewal === "" && now >= nextRenewal) void renew();
  const warning = $("signin").dataset.kind === "ending";
  if (left < WARN_BEFORE_S && !["", "asking", "renewing"].includes(renewal)) {
    const how = renewal === "unavailable"
      ? "this room does not renew sign-ins: sign in again where you signed in (your operator's sign-in page; in development, the link make run prints) to stay signed in."
      : `it could not be renewed (${renewal.replace(/_/g, " ")}): open your sign-in link again to stay signed in.`;
    $("signin").hidden = false;
    $("signin").dataset.kind = "ending";
    $("signin").textContent = `Your sign-in ends in ${countdown(left)}: ${how}`;
  } else if (warning && left >= WARN_BEFORE_S) {
    $("signin").hidden = true;
    delete $("signin").dataset.kind;
  }
}

async function renew(): Promise<void> {
  const current = token;
  renewal = "renewing";
  renewedFrom = current;
  try {
    const r = await renewToken(current);
    if ("token" in r) {
      token = r.token;
      keepToken(r.token);
      renewal = "";
      document.body.dataset.renewed = String(claims(r.token).exp);
    } else {
      renewal = "unavailable" in r ? "unavailable" : r.refused;
    }
  } catch {
    renewal = "";  // the network: tried again in 10 s
    nextRenewal = Date.now() / 1000 + 10;
  }
  tokenClock();
}

async function main(): Promise<void> {
  $("who").textContent = me.player ? `Signed in as ${me.player}` : "Not signed in";
  $("signout").onclick = () => {
    forgetToken();
    token = "";
    location.reload();
  };
  $("refresh").onclick = () => void refreshLobby();
  $("lobby").after(limits.root);
  const open = $("open-limits");
  open.onclick = () => {
    const opening = limits.root.hidden;
    open.setAttribute("aria-expanded", String(opening));
    if (opening) void limits.show().then(() => limits.root.scrollIntoView());
    else limits.hide();
  };
  if (!token) {
    signInNeeded("no_token");
    return;
  }
  // A second tab picks up the first's token and tables.
  window.addEventListener("storage", (e) => {
    if (e.key === "stud.token" && e.newValue) token = e.newValue;  // the other tab renewed it
  });
  const params = new URLSearchParams(location.search);
  const wanted = params.getAll("table");
  const saved: string[] = JSON.parse(localStorage.getItem(OPEN_KEY) ?? "[]");
  await Promise.all([refreshLobby(), limits.refresh()]);
  for (const id of wanted.length ? wanted : saved) void openTable(id);
  setInterval(() => panes.forEach((p) => p.tick()), 500);
  setInterval(tokenClock, 1000);
  void renewsTokens().then((yes) => { renewal = yes ? "" : "unavailable"; }, () => { renewal = ""; })
    .then(tokenClock);
  pollLobby();
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState !== "visible") return;
    void refreshLobby();
    pollLobby();
  });
  (window as unknown as { stud: unknown }).stud = { panes, openTable, closeTable, routes: api.routes, ready: true };
  document.body.dataset.ready = "1";
}

void main();
