import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { LineLimit, TopLevelId, type OversizedLine } from './line-limit.js';

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

  it('discards a longer line as it streams, reports its size and top-level id, and keeps serving the next line', async () => {
    const big = `{"jsonrpc":"2.0","method":"tools/call","id":"r-9","params":{"x":"${'x'.repeat(5000)}"}}`;
    const { out, oversized } = await feed(100, ['{"ok":1}\n', big.slice(0, 30), big.slice(30, 2000), big.slice(2000) + '\n{"ok":2}\n']);
    expect(out).toBe('{"ok":1}\n{"ok":2}\n');
    expect(oversized).toEqual([{ bytes: big.length, id: 'r-9' }]);
  });

  it('reports an oversized last line without a newline at end of input', async () => {
    const { out, oversized } = await feed(4, ['123456']);
    expect(out).toBe('');
    expect(oversized.map((o) => o.bytes)).toEqual([6]);
  });
});

describe('TopLevelId: the top-level id of a message, found as it streams', () => {
  const scan = (text: string, cuts: number[] = []) => {
    const t = new TopLevelId();
    const buf = Buffer.from(text);
    let at = 0;
    for (const c of [...cuts.filter((x) => x > 0 && x < buf.length).sort((a, b) => a - b), buf.length]) {
      t.feed(buf.subarray(at, c));
      at = c;
    }
    return t.id;
  };
  it.each([
    ['id last (TypeScript SDK)', '{"method":"tools/call","params":{"name":"x","arguments":{"id":"rec-1"}},"jsonrpc":"2.0","id":7}', 7],
    ['id first', '{"jsonrpc":"2.0","id":"abc","method":"tools/call","params":{"arguments":{"id":"rec-1"}}}', 'abc'],
    ['id between the method and the params', '{"jsonrpc":"2.0","method":"tools/call","id":42,"params":{"arguments":{"id":"rec-1"}}}', 42],
    ['nested id only is not the request id', '{"method":"x","params":{"id":5}}', undefined],
    ['no id (a notification)', '{"jsonrpc":"2.0","method":"notifications/x","params":{"a":"b"}}', undefined],
    ['"id" inside a string value', '{"method":"x","params":{"a":"\\",\\"id\\":9"},"b":"\\"id\\":3,"}', undefined],
    ['an escaped key that reads id', '{"\\u0069d":"esc","method":"x"}', 'esc'],
    ['the id key twice: the last wins, as in JSON.parse', '{"id":1,"method":"x","id":2}', 2],
    ['an id that is an object is none', '{"id":{"a":1},"method":"x"}', undefined],
    ['an id string with commas and braces', '{"method":"x","id":"a,}b","params":{}}', 'a,}b'],
    ['a message cut short', '{"method":"x","id":7', undefined],
  ])('%s', (_name, text, want) => {
    expect(scan(text)).toBe(want);
  });

  it('agrees with JSON.parse on any object, wherever its id is and however it is cut into pieces', () => {
    const key = fc.oneof(fc.constantFrom('id', 'method', 'params', 'jsonrpc', 'i', 'idx'), fc.string({ maxLength: 6 }));
    const obj = fc.dictionary(key, fc.jsonValue({ maxDepth: 3 }), { maxKeys: 6 });
    const id = fc.option(fc.oneof(fc.string({ maxLength: 20 }), fc.integer(), fc.jsonValue({ maxDepth: 1 })), { nil: undefined });
    fc.assert(
      fc.property(obj, id, fc.nat(6), fc.array(fc.nat(400), { maxLength: 8 }), (o, idValue, pos, cuts) => {
        const entries = Object.entries(o).filter(([k]) => k !== 'id');
        if (idValue !== undefined) entries.splice(Math.min(pos, entries.length), 0, ['id', idValue]);
        const text = `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`).join(',')}}`;
        const parsed = (JSON.parse(text) as { id?: unknown }).id;
        const want = typeof parsed === 'string' || typeof parsed === 'number' ? parsed : undefined;
        expect(scan(text, cuts)).toEqual(want);
      }),
      { numRuns: 500 },
    );
  });
});
