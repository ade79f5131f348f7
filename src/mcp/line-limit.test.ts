import { describe, expect, it } from 'vitest';
import { LineLimit, requestIdOf, type OversizedLine } from './line-limit.js';

async function feed(limit: number, chunks: string[]): Promise<{ out: string; oversized: OversizedLine[] }> {
  const oversized: OversizedLine[] = [];
  const t = new LineLimit(limit, (l) => oversized.push(l));
  const parts: Buffer[] = [];
  t.on('data', (b: Buffer) => parts.push(b));
  const done = new Promise((r) => t.on('end', r));
  for (const c of chunks) t.write(Buffer.from(c));
  t.end();
  await done;
  return { out: Buffer.concat(parts).toString(), oversized };
}

describe('LineLimit: one JSON-RPC message is bounded', () => {
  it('passes lines up to the limit through unchanged, however the input is chunked', async () => {
    const { out, oversized } = await feed(10, ['{"a"', ':1}\n{"b":2}\n', '0123456789', '\n']);
    expect(out).toBe('{"a":1}\n{"b":2}\n0123456789\n');
    expect(oversized).toEqual([]);
  });

  it('discards a longer line as it streams, reports its size, first and last bytes, and keeps serving the next line', async () => {
    const big = 'H' + 'x'.repeat(5000) + 'T';
    const { out, oversized } = await feed(100, ['{"ok":1}\n', big.slice(0, 30), big.slice(30, 2000), big.slice(2000) + '\n{"ok":2}\n']);
    expect(out).toBe('{"ok":1}\n{"ok":2}\n');
    expect(oversized).toHaveLength(1);
    expect(oversized[0]!.bytes).toBe(big.length);
    expect(oversized[0]!.head.toString().startsWith('Hxxx')).toBe(true);
    expect(oversized[0]!.tail.toString().endsWith('xxT')).toBe(true);
    expect(oversized[0]!.head.length).toBeLessThanOrEqual(512);
    expect(oversized[0]!.tail.length).toBeLessThanOrEqual(512);
  });

  it('reports an oversized last line without a newline at end of input', async () => {
    const { out, oversized } = await feed(4, ['123456']);
    expect(out).toBe('');
    expect(oversized.map((o) => o.bytes)).toEqual([6]);
  });
});

describe('requestIdOf: the top-level id of a message known by its ends', () => {
  const b = (s: string) => Buffer.from(s);
  it.each([
    ['id last (TypeScript SDK)', '{"method":"tools/call","params":{"name":"x","arguments":{"id":"rec-1"', '"}},"jsonrpc":"2.0","id":7}', 7],
    ['id first', '{"jsonrpc":"2.0","id":"abc","method":"tools/call","params":{"arguments":{"id":"rec-1"', '"}}}', 'abc'],
    ['nested id only at the end is not the request id', '{"method":"x","params":{', '"id":5}}', undefined],
    ['no id (a notification)', '{"jsonrpc":"2.0","method":"notifications/x","params":{"a":"', '"}}', undefined],
  ])('%s', (_name, head, tail, want) => {
    expect(requestIdOf(b(head), b(tail))).toBe(want);
  });
});
