// The room's services through the gateway (gRPC-Web, same origin) and the sign-in token.
import { Code, ConnectError, createClient, type Client, type Interceptor } from "@connectrpc/connect";
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

export interface Claims { player: string; exp: number }

/** The player and expiry the token names (read, not checked: the services check it). */
export function claims(token: string): Claims {
  try {
    const part = token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    const body = JSON.parse(atob(part + "=".repeat((4 - (part.length % 4)) % 4)));
    const sub = String(body.sub ?? "");
    return { player: sub.includes(":") ? sub.slice(sub.indexOf(":") + 1) : sub, exp: Number(body.exp ?? 0) };
  } catch {
    return { player: "", exp: 0 };
  }
}

export interface Api {
  table: Client<typeof TableService>;
  dealer: Client<typeof DealerService>;
  wallet: Client<typeof WalletService>;
  tournament: Client<typeof TournamentService>;
}

export function makeApi(token: () => string, baseUrl = location.origin): Api {
  const auth: Interceptor = (next) => async (req) => {
    req.header.set("authorization", `Bearer ${token()}`);
    return next(req);
  };
  const transport = createGrpcWebTransport({ baseUrl, interceptors: [auth] });
  return {
    table: createClient(TableService, transport),
    dealer: createClient(DealerService, transport),
    wallet: createClient(WalletService, transport),
    tournament: createClient(TournamentService, transport),
  };
}

/** A refusal as the services give it: the status code's name and the `stud-reason`. */
export interface Refusal { code: string; reason: string; message: string }

export function refusal(err: unknown): Refusal {
  if (err instanceof ConnectError) {
    const reason = err.metadata.get("stud-reason") ?? "";
    return { code: Code[err.code] ?? String(err.code), reason, message: err.rawMessage };
  }
  return { code: "Unknown", reason: "", message: err instanceof Error ? err.message : String(err) };
}

export function isAbort(err: unknown): boolean {
  return err instanceof ConnectError && err.code === Code.Canceled;
}

/** A refusal in words: "Refused: not your turn (FailedPrecondition)". */
export function refusalText(r: Refusal): string {
  const words = r.reason ? r.reason.replace(/_/g, " ") : r.message;
  return `${words} (${r.code}${r.reason && r.message ? `: ${r.message}` : ""})`;
}

export function commandId(): string {
  return crypto.randomUUID();
}
