// Reads cases (JSON, stdin) and prints the browser check's verdict of each (JSON, stdout):
// tests/browser/test_verify_parity.py holds src/verify.ts to studkit.cardcheck with it.
// Bundled for node by the test (esbuild); node's global WebCrypto is the browser's API.
import * as V from "../src/verify";

// node's globals (no @types/node here: esbuild strips the types, tsc checks src/ only)
declare const process: { stdin: AsyncIterable<Uint8Array>; stdout: { write(s: string): void } };
declare const Buffer: { concat(c: Uint8Array[]): { toString(e: string): string } };
type Buffer = Uint8Array;

interface JsonOpening { position: number; card: number; salt: string; path: string[] }

const bytes = (h: string): Uint8Array => new Uint8Array((h.match(/../g) ?? []).map((b) => parseInt(b, 16)));
const opening = (o: JsonOpening | null): V.Opening | null =>
  o === null ? null : { position: o.position, card: o.card, salt: bytes(o.salt), path: o.path.map(bytes) };

async function main(): Promise<void> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  const cases = JSON.parse(Buffer.concat(chunks).toString("utf8"));
  const out = [];
  for (const c of cases) {
    const p = c.proof;
    const proof: V.HandProof = {
      header: p.header,
      openings: p.openings.map((o: { draw: number; opening: JsonOpening }) => ({ draw: o.draw, opening: opening(o.opening)! })),
      complete: p.complete,
      dealerSeed: p.dealerSeed === null ? null : bytes(p.dealerSeed),
      seeds: p.seeds.map(([who, s]: [string, string | null]) => [who, s === null ? null : bytes(s)]),
    };
    const mine: V.OwnCards | null = c.mine === null ? null
      : { seat: c.mine.seat, down: c.mine.down, openings: c.mine.openings.map(opening) };
    const seed: V.OwnSeed | null = c.seed === null ? null : { ...c.seed, seed: bytes(c.seed.seed) };
    const v = await V.verifyMine({ table: c.table, player: c.player, events: c.events, burnCards: c.burnCards,
                                   proof, mine, seed, seenCommitment: c.seenCommitment, seedKnown: c.seedKnown });
    out.push({ ...v, summary: V.summary(v) });
  }
  process.stdout.write(JSON.stringify(out));
}

void main();
