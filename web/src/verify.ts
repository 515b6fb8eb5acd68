// The player's own check of a hand in the browser (docs/fairness.md, docs/web.md): a port of
// libs/studkit/cardproof.py (scheme stud-hilo-cards-v2), libs/rules/draws.py's public deal
// rule and libs/studkit/cardcheck.py's verify_mine, with WebCrypto's SHA-256. Same encodings,
// same checks, same problem sentences; tests/browser holds the two to the same verdicts.
// Problems name draws, streets and seats, never a hidden card.

export const DECK_SIZE = 52;
const HASH_BYTES = 32;
const SEED_BYTES = 32;
const SALT_BYTES = 32;
const MAX_PATH = 6;
const BURN_SEAT = -1;
const enc = new TextEncoder();

// --- bytes ----------------------------------------------------------------------------------

function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

export async function sha256(data: Uint8Array): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", data as BufferSource));
}

export function hex(data: Uint8Array): string {
  return Array.from(data, (b) => b.toString(16).padStart(2, "0")).join("");
}

function isHex(text: string, size = HASH_BYTES): boolean {
  return text.length === 2 * size && /^[0-9a-f]*$/.test(text);
}

/** Equality of two hex digests without an early exit (as hmac.compare_digest). */
export function same(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

// --- leaves and the Merkle tree (RFC 6962) --------------------------------------------------

const LEAF = concat(new Uint8Array([0]), enc.encode("stud-hilo-card-v2"));
const NODE = new Uint8Array([1]);

async function leaf(position: number, card: number, salt: Uint8Array): Promise<Uint8Array | null> {
  if (!(position >= 0 && position < DECK_SIZE && card >= 0 && card < DECK_SIZE)) return null;
  if (salt.length !== SALT_BYTES) return null;
  return sha256(concat(LEAF, new Uint8Array([position, card]), salt));
}

/** The root a path leads to from a leaf (RFC 9162 2.1.3.2), null when it has the wrong shape. */
export async function rootFromPath(leafHash: Uint8Array, index: number, size: number,
                                   path: Uint8Array[]): Promise<Uint8Array | null> {
  if (!(index >= 0 && index < size) || path.some((p) => p.length !== HASH_BYTES)) return null;
  let fn = index;
  let sn = size - 1;
  let node = leafHash;
  for (const sibling of path) {
    if (sn === 0) return null;
    if (fn % 2 === 1 || fn === sn) {
      node = await sha256(concat(NODE, sibling, node));
      if (fn % 2 === 0) {
        while (fn % 2 === 0 && fn !== 0) {
          fn >>= 1;
          sn >>= 1;
        }
      }
    } else {
      node = await sha256(concat(NODE, node, sibling));
    }
    fn >>= 1;
    sn >>= 1;
  }
  return sn === 0 ? node : null;
}

export interface Opening {
  position: number;
  card: number;
  salt: Uint8Array;
  path: Uint8Array[];
}

/** Whether an opening proves its card at its position under the root (hex). */
export async function opens(o: Opening, rootHex: string): Promise<boolean> {
  if (o.path.length > MAX_PATH) return false;
  const node = await leaf(o.position, o.card, o.salt);
  if (node === null) return false;
  const got = await rootFromPath(node, o.position, DECK_SIZE, o.path);
  return got !== null && same(hex(got), rootHex);
}

// --- seeds and the card commitment ----------------------------------------------------------

export async function dealerSeedCommitment(table: string, hand: number, seed: Uint8Array): Promise<string> {
  if (seed.length !== SEED_BYTES) throw new Error(`a seed is ${SEED_BYTES} bytes`);
  return hex(await sha256(concat(enc.encode(`stud-hilo-dealer-seed-v2|${table}|${hand}|`), seed)));
}

export async function seedCommitment(table: string, hand: number, player: string,
                                     seed: Uint8Array): Promise<string> {
  if (seed.length !== SEED_BYTES) throw new Error(`a seed is ${SEED_BYTES} bytes`);
  return hex(await sha256(concat(enc.encode(`stud-hilo-seed-v2|${table}|${hand}|${player}|`), seed)));
}

export interface DealHeader {
  table: string;
  hand: number;
  root: string;
  dealerSeed: string;
  seeds: [string, string][];
}

/** Throws when the header is malformed (as DealHeader.__post_init__). */
export function checkHeader(h: DealHeader): void {
  const players = h.seeds.map(([p]) => p);
  const sorted = [...new Set(players)].sort(cmp);
  if (players.length !== sorted.length || players.some((p, i) => p !== sorted[i])) {
    throw new Error("seed commitments must be one per player, in player order");
  }
  if (![h.root, h.dealerSeed, ...h.seeds.map(([, c]) => c)].every((x) => isHex(x))) {
    throw new Error("hashes are 64 lowercase hex digits");
  }
}

export async function headerCommitment(h: DealHeader): Promise<string> {
  const seeds = h.seeds.map(([p, c]) => `${p}:${c}`).join(",");
  return hex(await sha256(enc.encode(
    `stud-hilo-deal-v2|${h.table}|${h.hand}|${h.root}|${h.dealerSeed}|${seeds}`)));
}

function seedOf(h: DealHeader, player: string): string | null {
  const found = h.seeds.find(([p]) => p === player);
  return found ? found[1] : null;
}

/** Python's default str ordering (code points), which sorted() uses. */
function cmp(a: string, b: string): number {
  const x = Array.from(a, (c) => c.codePointAt(0)!);
  const y = Array.from(b, (c) => c.codePointAt(0)!);
  for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i] - y[i];
  return x.length - y.length;
}

// --- the deal order -------------------------------------------------------------------------

async function shuffleKey(table: string, hand: number, dealerSeed: Uint8Array,
                          seeds: [string, Uint8Array | null][]): Promise<Uint8Array> {
  const ordered = [...seeds].sort((a, b) => cmp(a[0], b[0]));
  if (new Set(ordered.map(([p]) => p)).size !== ordered.length) throw new Error("one seed per player");
  const text = ordered.map(([p, s]) => `${p}:${s === null ? "-" : hex(s)}`).join(",");
  return sha256(enc.encode(`stud-hilo-shuffle-v2|${table}|${hand}|${hex(dealerSeed)}|${text}`));
}

const TWO64 = 1n << 64n;

async function derivePermutation(key: Uint8Array, label: string, size = DECK_SIZE): Promise<number[]> {
  const prefix = concat(key, enc.encode(label));
  let counter = 0n;
  let words: bigint[] = [];
  const next = async (): Promise<bigint> => {
    if (words.length === 0) {
      const c = new Uint8Array(8);
      new DataView(c.buffer).setBigUint64(0, counter);
      counter += 1n;
      const block = new DataView((await sha256(concat(prefix, c))).buffer);
      words = [0, 8, 16, 24].map((o) => block.getBigUint64(o));
    }
    return words.shift()!;
  };
  const items = Array.from({ length: size }, (_, i) => i);
  for (let top = size - 1; top > 0; top--) {
    const n = BigInt(top + 1);
    const limit = TWO64 - (TWO64 % n);
    let x = await next();
    while (x >= limit) x = await next();
    const pick = Number(x % n);
    [items[top], items[pick]] = [items[pick], items[top]];
  }
  return items;
}

// --- the public deal rule (libs/rules/dealing.py street_plan, libs/rules/draws.py) ----------

/** A dealt card in the public record: seat 0 the community card; card null when face down. */
export type DealEvent =
  | { kind: "started"; hand: number; seats: number[]; cardCommitment: string }
  | { kind: "down"; seat: number; street: number }
  | { kind: "up"; seat: number; street: number; card: number }
  | { kind: "community"; card: number }
  | { kind: "burn" }
  | { kind: "reshuffle" }
  | { kind: "folded"; seat: number }
  | { kind: "exposed"; seat: number; down: number[] }
  | { kind: "shown"; seat: number; down: number[] }
  | { kind: "other" };

interface Slot { seat: number; up: boolean }
interface Plan { street: number; slots: Slot[]; burn: boolean; reshuffle: boolean }
interface Drawn { draw: number; street: number; seat: number; up: boolean; item: number }

const label = (street: number): string =>
  ({ 3: "3rd", 4: "4th", 5: "5th", 6: "6th", 7: "7th" } as Record<number, string>)[street] + " street";

class DealRuleBroken extends Error {}

function streetPlan(street: number, dealtIn: number[], stillIn: number[], exposed: boolean,
                    stub: number, burned: number, burnCards: boolean): Plan {
  if (street === 3) {
    const slots: Slot[] = [];
    for (let pass = 0; pass < 3; pass++) for (const s of dealtIn) slots.push({ seat: s, up: pass === 2 });
    return { street, slots, burn: false, reshuffle: false };
  }
  const up = street !== 7 || exposed;
  const burn = burnCards;
  const each = stillIn.map((s) => ({ seat: s, up }));
  if (street !== 7) return { street, slots: each, burn, reshuffle: false };
  const need = stillIn.length + (burn ? 1 : 0);
  let reshuffle = false;
  if (stub < need && burn) {
    reshuffle = true;
    stub += burned;
  }
  if (stub >= need) return { street, slots: each, burn, reshuffle };
  return { street, slots: [{ seat: 0, up: true }], burn, reshuffle };
}

const DEAL_KINDS = new Set(["reshuffle", "burn", "down", "up", "community"]);

function describe(want: { kind: string; seat?: number }): string {
  switch (want.kind) {
    case "reshuffle": return "shuffles the burned cards back in";
    case "burn": return "burns a card";
    case "community": return "deals the community card";
    case "up": return `deals an up card to seat ${want.seat}`;
    default: return `deals a down card to seat ${want.seat}`;
  }
}

function handPlans(events: DealEvent[], burnCards: boolean): Plan[] {
  let dealtIn: number[] = [];
  const folded = new Set<number>();
  const exposedSeats = new Set<number>();
  let street: number | null = null;
  let dealt = 0, burns = 0, burned = 0;
  const plans: Plan[] = [];
  let i = 0;
  while (i < events.length) {
    const e = events[i];
    if (e.kind === "started") dealtIn = e.seats;
    else if (e.kind === "folded") folded.add(e.seat);
    else if (e.kind === "exposed") exposedSeats.add(e.seat);
    if (!DEAL_KINDS.has(e.kind)) {
      i += 1;
      continue;
    }
    const nxt = street === null ? 3 : street < 7 ? street + 1 : null;
    if (nxt === null) throw new DealRuleBroken("a card is dealt after 7th street");
    const stillIn = dealtIn.filter((s) => !folded.has(s));
    const exposed = stillIn.length > 0 && stillIn.every((s) => exposedSeats.has(s));
    const plan = streetPlan(nxt, dealtIn, stillIn, exposed, DECK_SIZE - dealt - burned, burned, burnCards);
    const expected: { kind: string; seat?: number; street?: number }[] = [];
    if (plan.reshuffle) expected.push({ kind: "reshuffle" });
    if (plan.burn) expected.push({ kind: "burn" });
    for (const slot of plan.slots) {
      if (slot.seat === 0) expected.push({ kind: "community" });
      else expected.push({ kind: slot.up ? "up" : "down", seat: slot.seat, street: plan.street });
    }
    let draw = dealt + burns;
    for (let k = 0; k < expected.length; k++) {
      const want = expected[k];
      const got = events[i + k];
      const ok = got !== undefined && got.kind === want.kind &&
        (want.kind !== "up" && want.kind !== "down" ||
          ((got as { seat: number }).seat === want.seat && (got as { street: number }).street === want.street));
      if (!ok) throw new DealRuleBroken(`${label(plan.street)}, draw ${draw}: the rule ${describe(want)}`);
      if (want.kind !== "reshuffle") draw += 1;
    }
    if (plan.reshuffle) burned = 0;
    if (plan.burn) {
      burns += 1;
      burned += 1;
    }
    dealt += plan.slots.length;
    street = plan.street;
    plans.push(plan);
    i += expected.length;
  }
  return plans;
}

function dealHand(plans: Plan[], deal: number[], reshuffleOrder: number[]): Drawn[] {
  let items = [...deal];
  let burnedItems: number[] = [];
  let drawn = 0;
  const out: Drawn[] = [];
  const take = (): number => {
    if (items.length === 0) throw new DealRuleBroken("the stub is empty");
    drawn += 1;
    return items.shift()!;
  };
  const rank = new Map(reshuffleOrder.map((item, place) => [item, place]));
  for (const plan of plans) {
    if (plan.reshuffle) {
      items = [...items, ...burnedItems].sort((a, b) => rank.get(a)! - rank.get(b)!);
      burnedItems = [];
    }
    if (plan.burn) {
      const draw = drawn;
      const item = take();
      burnedItems.push(item);
      out.push({ draw, street: plan.street, seat: BURN_SEAT, up: false, item });
    }
    for (const slot of plan.slots) {
      const draw = drawn;
      out.push({ draw, street: plan.street, seat: slot.seat, up: slot.up, item: take() });
    }
  }
  return out;
}

function publicCards(events: DealEvent[], draws: Drawn[]): Map<number, number> {
  const dealt = draws.filter((d) => d.seat !== BURN_SEAT);
  const cardEvents: [number, number | null][] = [];
  for (const e of events) {
    if (e.kind === "down") cardEvents.push([e.seat, null]);
    else if (e.kind === "up") cardEvents.push([e.seat, e.card]);
    else if (e.kind === "community") cardEvents.push([0, e.card]);
  }
  const out = new Map<number, number>();
  for (let k = 0; k < Math.min(cardEvents.length, dealt.length); k++) {
    const [seat, card] = cardEvents[k];
    const draw = dealt[k];
    if (card !== null && draw.seat === seat && (draw.up || seat === 0)) out.set(draw.draw, card);
  }
  for (const e of events) {
    if (e.kind === "shown" || e.kind === "exposed") {
      const downs = dealt.filter((d) => d.seat === e.seat && !d.up);
      for (let k = 0; k < Math.min(downs.length, e.down.length); k++) out.set(downs[k].draw, e.down[k]);
    }
  }
  return out;
}

// --- the verdict ----------------------------------------------------------------------------

export interface HandProof {
  header: DealHeader;
  openings: { draw: number; opening: Opening }[];
  complete: boolean;
  dealerSeed: Uint8Array | null;
  seeds: [string, Uint8Array | null][];
}

export interface OwnCards { seat: number; down: number[]; openings: (Opening | null)[] }

export interface OwnSeed { seed: Uint8Array; committed: boolean; opened: boolean; refused: string }

export type Outcome = "verified" | "verified_without_your_seed" | "failed" | "unverifiable";

export interface Verdict {
  hand: number;
  outcome: Outcome;
  problems: string[];
  ownCards: number;
  publicCards: number;
  seeds: number;
  mySeedUsed: boolean;
  seedChecked: boolean;
  mySeedListed: boolean;
  seedNote: string;
}

function makeVerdict(hand: number, outcome: Outcome, problems: string[],
                     counts: Partial<Verdict> = {}): Verdict {
  return { hand, outcome, problems, ownCards: 0, publicCards: 0, seeds: 0, mySeedUsed: false,
           seedChecked: true, mySeedListed: false, seedNote: "", ...counts };
}

/** One line for a person (Verdict.summary). */
export function summary(v: Verdict): string {
  if (v.outcome === "unverifiable") return `hand ${v.hand}: not verifiable (${v.problems[0]})`;
  if (v.outcome === "failed") {
    return `hand ${v.hand}: CHECK FAILED: ${v.problems[0]}` +
      (v.problems.length > 1 ? ` (+${v.problems.length - 1} more)` : "");
  }
  const counts = `${v.ownCards} own, ${v.publicCards} public cards`;
  if (v.outcome === "verified_without_your_seed") {
    return `hand ${v.hand}: verified WITHOUT YOUR SEED (${counts}; ${v.seeds} player seeds): ${v.seedNote}`;
  }
  if (!v.seedChecked) {
    return `hand ${v.hand}: verified (${counts}; ${v.seeds} player seeds, ` +
      (v.mySeedListed ? "one under your name" : "none under your name") + "; your seed not checked)";
  }
  let seed = v.mySeedUsed ? "with your seed" : "without your seed";
  if (v.seedNote) seed = `${seed}: ${v.seedNote}`;
  return `hand ${v.hand}: verified (${counts}; ${v.seeds} player seeds, ${seed})`;
}

export function withoutCommitment(hand: number, seed: OwnSeed | null): Verdict {
  if (seed !== null && seed.committed) {
    return makeVerdict(hand, "failed", ["the dealer took your seed for this hand but published no per-card commitment"]);
  }
  return makeVerdict(hand, "unverifiable", ["the hand has no per-card commitment"]);
}

async function checkCard(o: Opening, card: number, position: number, root: string, where: string,
                         problems: string[]): Promise<void> {
  if (!(await opens(o, root))) problems.push(`${where}: the opening does not match the commitment`);
  else if (o.card !== card) problems.push(`${where}: the opening proves another card`);
  else if (o.position !== position) problems.push(`${where}: the card is not at the position the deal rule gives`);
}

function bytesEqual(a: Uint8Array | null | undefined, b: Uint8Array | null | undefined): boolean {
  if (!a || !b || a.length !== b.length) return false;
  return a.every((x, i) => x === b[i]);
}

/** cardcheck.verify_mine: check a finished hand as `player`. */
export async function verifyMine(args: {
  table: string; player: string; events: DealEvent[]; burnCards: boolean; proof: HandProof;
  mine: OwnCards | null; seed: OwnSeed | null; seenCommitment: string | null; seedKnown: boolean;
}): Promise<Verdict> {
  const { table, player, events, burnCards, proof, mine, seed, seenCommitment, seedKnown } = args;
  const started = events.find((e) => e.kind === "started") as Extract<DealEvent, { kind: "started" }> | undefined;
  const number = started ? started.hand : 0;
  if (!started) return makeVerdict(number, "failed", ["the public record has no HandStarted"]);
  if (seenCommitment !== null && !same(seenCommitment, started.cardCommitment)) {
    return makeVerdict(number, "failed", ["the hand's record shows another card commitment than the HandStarted seen live before the deal"]);
  }
  if (!started.cardCommitment) return withoutCommitment(number, seed);
  const problems: string[] = [];
  const header = proof.header;
  if (header.table !== table || header.hand !== number) {
    return makeVerdict(number, "failed", ["the dealer's proof is for another hand"]);
  }
  if (!same(await headerCommitment(header), started.cardCommitment)) {
    return makeVerdict(number, "failed", ["the dealer's header does not match the card commitment published at hand start"]);
  }
  if (!proof.complete || proof.dealerSeed === null) {
    return makeVerdict(number, "failed", ["the dealer did not open its seed after the hand"]);
  }
  if (!same(await dealerSeedCommitment(table, number, proof.dealerSeed), header.dealerSeed)) {
    problems.push("the dealer's seed does not open its commitment");
  }
  const listed = header.seeds.map(([p]) => p);
  const openedPlayers = proof.seeds.map(([p]) => p).sort(cmp);
  if (openedPlayers.length !== listed.length || openedPlayers.some((p, i) => p !== listed[i])) {
    problems.push("the opened seeds are not the committed ones");
  }
  let opened = 0;
  for (const [p, value] of proof.seeds) {
    const commitment = seedOf(header, p);
    if (value === null || commitment === null) continue;
    opened += 1;
    if (!same(await seedCommitment(table, number, p, value), commitment)) {
      problems.push(`${p}'s seed does not open its commitment`);
    }
  }
  const seedMap = new Map(proof.seeds);
  let myUsed = false;
  if (seed !== null) {
    const mineListed = seedOf(header, player);
    const myCommitment = await seedCommitment(table, number, player, seed.seed);
    if (seed.committed && (mineListed === null || !same(mineListed, myCommitment))) {
      problems.push("your seed commitment is not in the card commitment");
    }
    myUsed = bytesEqual(seedMap.get(player), seed.seed);
    if (seed.opened && !myUsed) problems.push("your seed was taken before the deal but is not in the deal order");
  }
  if (problems.length) return makeVerdict(number, "failed", problems, { seeds: opened, mySeedUsed: myUsed });
  const key = await shuffleKey(table, number, proof.dealerSeed, proof.seeds);
  const deal = await derivePermutation(key, "deal");
  const reshuffle = await derivePermutation(key, "reshuffle");
  let draws: Drawn[];
  try {
    draws = dealHand(handPlans(events, burnCards), deal, reshuffle);
  } catch (exc) {
    if (!(exc instanceof DealRuleBroken)) throw exc;
    return makeVerdict(number, "failed", [`the public record breaks the deal rule: ${exc.message}`],
                       { seeds: opened, mySeedUsed: myUsed });
  }
  // _check_own
  let own = 0;
  if (mine !== null) {
    const downs = draws.filter((d) => d.seat === mine.seat && !d.up);
    for (let k = 0; k < downs.length; k++) {
      const draw = downs[k];
      const where = `your down card ${k + 1} (${label(draw.street)}, draw ${draw.draw})`;
      if (k >= mine.down.length) {
        problems.push(`${where}: never received`);
        continue;
      }
      const o = k < mine.openings.length ? mine.openings[k] : null;
      if (o === null) {
        problems.push(`${where}: the dealer sent no opening`);
        continue;
      }
      await checkCard(o, mine.down[k], draw.item, header.root, where, problems);
    }
    if (mine.down.length > downs.length) problems.push("you received more down cards than the public record dealt you");
    own = downs.length;
  }
  // _check_public
  const byDraw = new Map(draws.map((d) => [d.draw, d]));
  const shown = publicCards(events, draws);
  const openings = new Map(proof.openings.map((o) => [o.draw, o.opening]));
  for (const [n, card] of [...shown.entries()].sort((a, b) => a[0] - b[0])) {
    const draw = byDraw.get(n)!;
    const where = `${label(draw.street)}, draw ${n}, ` + (draw.seat === 0 ? "the community card" : `seat ${draw.seat}`);
    const o = openings.get(n);
    if (o === undefined) {
      problems.push(`${where}: no public opening`);
      continue;
    }
    await checkCard(o, card, draw.item, header.root, where, problems);
  }
  const extra = [...openings.keys()].filter((d) => !shown.has(d));
  if (extra.length) problems.push(`the dealer published openings of ${extra.length} cards never shown`);
  const inOrder = (seedMap.get(player) ?? null) !== null && seedOf(header, player) !== null;
  const counts: Partial<Verdict> = { ownCards: own, publicCards: shown.size, seeds: opened, mySeedUsed: myUsed,
                                     mySeedListed: inOrder, seedChecked: seed !== null || seedKnown };
  if (problems.length) return makeVerdict(number, "failed", problems, counts);
  if (seed === null && !seedKnown && seedOf(header, player) !== null && !inOrder) {
    return makeVerdict(number, "verified_without_your_seed", [], { ...counts, seedNote:
      "a seed was committed under your name but withheld from the deal order (the dealer refused its " +
      "opening, or it was never opened); the deal order rests on the dealer, not on your seed" });
  }
  if (seed === null || myUsed) return makeVerdict(number, "verified", [], counts);
  if (seed.committed && seed.refused) {
    return makeVerdict(number, "verified_without_your_seed", [], { ...counts, seedNote:
      `the dealer refused it (${seed.refused}) after receiving it; the deal order rests on the dealer, not on your seed` });
  }
  return makeVerdict(number, "verified", [], { ...counts, seedNote: seed.refused
    ? `the dealer refused its commitment (${seed.refused}) before seeing it`
    : "it was not opened before the deal" });
}
