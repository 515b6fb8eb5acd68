// The room's services through the gateway (gRPC-Web, same origin) and the sign-in token.
import { Code, ConnectError, createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createAsyncIterable } from "@connectrpc/connect/protocol";
import { createGrpcWebTransport } from "@connectrpc/connect-web";
import { DealerService } from "./gen/stud/v1/dealer_pb";
import { TableService } from "./gen/stud/v1/table_pb";
import { TournamentService } from "./gen/stud/v1/tournament_pb";
import { WalletService } from "./gen/stud/v1/wallet_pb";

const TOKEN_KEY = "stud.token";

/** The sign-in token: from the link's fragment (#token=...), kept in localStorage so that a
 * second tab of the same player is signed in too; never in a query string. */
export function takeToken(): string {
  const hash = new URLSearchParams(location.hash.replace(/^#/, ""));
  const fromLink = hash.get("token") ?? hash.get("access_token");
  if (fromLink) {
    localStorage.setItem(TOKEN_KEY, fromLink);
    hash.delete("token");
    hash.delete("access_token");
    const rest = hash.toString();
    history.replaceState(null, "", location.pathname + location.search + (rest ? `#${rest}` : ""));
  }
  return localStorage.getItem(TOKEN_KEY) ?? "";
}

export function forgetToken(): void {
  localStorage.removeItem(TOKEN_KEY);
}

export interface Claims { player: string; exp: number; iat: number }

/** The player, issue time and expiry the token names (read, not checked: the services check it). */
export function claims(token: string): Claims {
  try {
    const part = token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    const body = JSON.parse(atob(part + "=".repeat((4 - (part.length % 4)) % 4)));
    const sub = String(body.sub ?? "");
    return { player: sub.includes(":") ? sub.slice(sub.indexOf(":") + 1) : sub, exp: Number(body.exp ?? 0),
             iat: Number(body.iat ?? 0) };
  } catch {
    return { player: "", exp: 0, iat: 0 };
  }
}

/** Keeps a renewed token for this tab and the others (localStorage). */
export function keepToken(token: string): void {
  localStorage.setItem(TOKEN_KEY, token);
}

/** A renewal's outcome: a fresh token; `unavailable` where the room has no renewal (a
 * production gateway: 404, the identity provider signs players in again); or refused. */
export type Renewal = { token: string } | { unavailable: true } | { refused: string };

/** Whether the room renews tokens (`GET /auth/renew`: 200 in development, 404 elsewhere). */
export async function renewsTokens(baseUrl = location.origin): Promise<boolean> {
  const answer = await fetch(`${baseUrl}/auth/renew`, { cache: "no-store" });
  return answer.ok;
}

/** `POST /auth/renew` with the live token (a development room's studtools.devsignin through
 * the gateway): the same player's fresh token. */
export async function renewToken(current: string, baseUrl = location.origin): Promise<Renewal> {
  const answer = await fetch(`${baseUrl}/auth/renew`, {
    method: "POST", cache: "no-store", headers: { authorization: `Bearer ${current}` } });
  if (answer.status === 404 || answer.status === 405) return { unavailable: true };
  const body = await answer.json().catch(() => ({})) as { token?: unknown; reason?: unknown };
  if (answer.ok && typeof body.token === "string") return { token: body.token };
  return { refused: String(body.reason ?? `HTTP ${answer.status}`) };
}

export interface Api {
  table: Client<typeof TableService>;
  dealer: Client<typeof DealerService>;
  wallet: Client<typeof WalletService>;
  tournament: Client<typeof TournamentService>;
  /** table id -> the table replica that owns it (`ip:port`), learnt from not_owner. */
  routes: Routes;
}

export function makeApi(token: () => string, baseUrl = location.origin,
                        routes: Routes = new Map()): Api {
  const auth: Interceptor = (next) => async (req) => {
    req.header.set("authorization", `Bearer ${token()}`);
    return next(req);
  };
  const transport = createGrpcWebTransport({ baseUrl, interceptors: [auth, followOwner(routes)] });
  return {
    table: createClient(TableService, transport),
    dealer: createClient(DealerService, transport),
    wallet: createClient(WalletService, transport),
    tournament: createClient(TournamentService, transport),
    routes,
  };
}

/** A refusal as the services give it: the status code's name, the `stud-reason` and its
 * google.rpc.ErrorInfo's metadata (a limit's `remaining`, `resets_at_ms`, ...). */
export interface Refusal { code: string; reason: string; message: string; meta: Map<string, string> }

export function refusal(err: unknown): Refusal {
  if (err instanceof ConnectError) {
    const reason = err.metadata.get("stud-reason") ?? "";
    return { code: Code[err.code] ?? String(err.code), reason, message: err.rawMessage, meta: errorMeta(err) };
  }
  return { code: "Unknown", reason: "", message: err instanceof Error ? err.message : String(err), meta: new Map() };
}

function errorMeta(err: ConnectError): Map<string, string> {
  for (const d of err.details) {
    if (!("type" in d) || !d.type.endsWith("google.rpc.ErrorInfo") || !(d.value instanceof Uint8Array)) continue;
    return errorInfo(d.value).metadata;
  }
  return new Map();
}

/** A wallet time (ms since the epoch) as UTC minutes, as studclient.protection.when says it. */
export function when(ms: number | bigint): string {
  return new Date(Number(ms)).toISOString().slice(0, 16).replace("T", " ") + " UTC";
}

/** A refusal by a limit, a session limit or an exclusion in words (studclient.protection's
 * refusal_text, word for word), or "" for any other refusal. */
export function protectionText(r: Refusal): string {
  const m = r.meta;
  const n = (k: string) => Number(m.get(k) ?? "0");
  if (["deposit_limit", "loss_limit", "wager_limit"].includes(r.reason) && m.has("remaining")) {
    return `Your ${m.get("window") ?? ""} ${m.get("kind") ?? ""} limit of ${n("limit").toLocaleString("en-US")} has ` +
      `${n("remaining").toLocaleString("en-US")} left; more frees at ${when(n("resets_at_ms"))}.`;
  }
  if (r.reason === "session_limit") {
    return `Your session reached its time limit at ${when(n("ended_ms"))}; a new one may start ` +
      "after 30 minutes away from every table.";
  }
  if (r.reason === "self_excluded" || r.reason === "operator_excluded") {
    return "You are excluded from play " + (n("until_ms") === 0 ? "until an operator lifts it." : `until ${when(n("until_ms"))}.`);
  }
  return "";
}

export function isAbort(err: unknown): boolean {
  return err instanceof ConnectError && err.code === Code.Canceled;
}

/** A refusal in words: "Refused: not your turn (FailedPrecondition)". */
export function refusalText(r: Refusal): string {
  const protection = protectionText(r);
  if (protection) return `${protection} (${r.code}: ${r.reason})`;
  const words = r.reason ? r.reason.replace(/_/g, " ") : r.message;
  return `${words} (${r.code}${r.reason && r.message ? `: ${r.message}` : ""})`;
}

/** A fresh command id, timed like the SDK's: `t<Unix ms, 13 digits>-<20 hex>` (a retry of it
 * after the idempotency window is refused `command_expired`, docs/history.md). */
export function commandId(): string {
  const random = crypto.randomUUID().replace(/-/g, "").slice(0, 20);
  return `t${String(Date.now()).padStart(13, "0")}-${random}`;
}

// --- table replicas behind the gateway (docs/web.md "Web client: table owners") -------------

export type Routes = Map<string, string>;

/** Through the gateway, a table call carrying this header (`ip:port`) goes to that replica. */
export const OWNER_HEADER = "stud-owner";

/** The `owner` a `not_owner` refusal names (its google.rpc.ErrorInfo's metadata); "" if none. */
export function ownerOf(err: unknown): string {
  if (!(err instanceof ConnectError) || err.code !== Code.FailedPrecondition) return "";
  for (const d of err.details) {
    if (!("type" in d) || !d.type.endsWith("google.rpc.ErrorInfo") || !(d.value instanceof Uint8Array)) continue;
    const info = errorInfo(d.value);
    if (info.reason === "not_owner") return info.metadata.get("owner") ?? "";
  }
  return "";
}

/** google.rpc.ErrorInfo { string reason = 1; string domain = 2; map<string,string> metadata = 3 }. */
function errorInfo(bytes: Uint8Array): { reason: string; metadata: Map<string, string> } {
  const out = { reason: "", metadata: new Map<string, string>() };
  const fields = (buf: Uint8Array, each: (no: number, value: Uint8Array) => void): void => {
    let at = 0;
    const varint = (): number => {
      let n = 0, shift = 0, b = 0;
      do { b = buf[at++]; n += (b & 0x7f) * 2 ** shift; shift += 7; } while (b & 0x80 && at < buf.length);
      return n;
    };
    while (at < buf.length) {
      const key = varint();
      const wire = key & 7;
      if (wire === 0) { varint(); continue; }
      if (wire === 1) { at += 8; continue; }
      if (wire === 5) { at += 4; continue; }
      if (wire !== 2) return;
      const len = varint();
      each(key >>> 3, buf.subarray(at, at + len));
      at += len;
    }
  };
  const text = new TextDecoder();
  fields(bytes, (no, value) => {
    if (no === 1) out.reason = text.decode(value);
    if (no !== 3) return;
    let k = "", v = "";
    fields(value, (n, x) => { if (n === 1) k = text.decode(x); else if (n === 2) v = text.decode(x); });
    out.metadata.set(k, v);
  });
  return out;
}

/** Table calls through the gateway follow the table to the replica that owns it: a call for a
 * table with a known owner carries `stud-owner`; a unary call refused `not_owner` records the
 * owner and is repeated once with the header (commands keep their command_id: idempotent); a
 * stream that ends `not_owner` records it, so the page's resume reopens at the owner. When the
 * gateway answers UNAVAILABLE (the owner went away) the route is forgotten: the next call goes
 * to the table Service again, whose replica names the new owner. */
function followOwner(routes: Routes): Interceptor {
  const learn = (tableId: string, err: unknown): boolean => {
    const owner = ownerOf(err);
    if (owner && routes.get(tableId) !== owner) {
      routes.set(tableId, owner);
      return true;
    }
    if (err instanceof ConnectError && err.code === Code.Unavailable) routes.delete(tableId);
    return false;
  };
  const route = (req: { header: Headers }, tableId: string): void => {
    const owner = routes.get(tableId);
    if (owner) req.header.set(OWNER_HEADER, owner);
    else req.header.delete(OWNER_HEADER);
  };
  return (next) => async (req) => {
    if (req.service.typeName !== TableService.typeName) return next(req);
    if (!req.stream) {
      const tableId = String((req.message as { tableId?: unknown }).tableId ?? "");
      if (!tableId) return next(req);
      route(req, tableId);
      try {
        return await next(req);
      } catch (err) {
        if (!learn(tableId, err)) throw err;
        route(req, tableId);
        return await next(req);
      }
    }
    // A server stream (WatchTable): its one request is read to learn the table.
    const inputs: unknown[] = [];
    for await (const m of req.message) inputs.push(m);
    const tableId = String((inputs[0] as { tableId?: unknown } | undefined)?.tableId ?? "");
    req = { ...req, message: createAsyncIterable(inputs) } as typeof req;
    if (!tableId) return next(req);
    route(req, tableId);
    let res;
    try {
      res = await next(req);
    } catch (err) {
      learn(tableId, err);
      throw err;
    }
    if (!res.stream) return res;
    const messages = res.message;
    return {
      ...res,
      message: (async function* () {
        try {
          yield* messages;
        } catch (err) {
          learn(tableId, err);
          throw err;
        }
      })(),
    } as typeof res;
  };
}
