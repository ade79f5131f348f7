/**
 * A bound on one JSON-RPC message from stdin. The SDK's stdio transport
 * buffers a whole line before parsing it, and on overflow drops its buffer
 * and closes the connection. This filter sits in front of it: lines up to
 * the limit pass through unchanged; a longer line is discarded as it streams
 * (memory stays bounded) and reported, so the server can answer that one
 * request with E_TOO_LARGE and keep serving.
 */
import { Transform, type TransformCallback } from 'node:stream';

const KEEP = 512;

export interface OversizedLine {
  /** Length of the discarded line in bytes (without its newline). */
  bytes: number;
  /** Its first and last bytes, to find the request id. */
  head: Buffer;
  tail: Buffer;
}

export class LineLimit extends Transform {
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private discarding: { bytes: number; head: Buffer; tail: Buffer } | null = null;

  constructor(private readonly limit: number, private readonly onOversized: (line: OversizedLine) => void) {
    super();
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    let start = 0;
    while (start < chunk.length) {
      const nl = chunk.indexOf(0x0a, start);
      const end = nl === -1 ? chunk.length : nl;
      const piece = chunk.subarray(start, end);
      if (this.discarding) {
        this.discard(piece);
      } else if (this.pendingBytes + piece.length > this.limit) {
        const sofar = Buffer.concat([...this.pending, piece]);
        this.pending = [];
        this.pendingBytes = 0;
        this.discarding = { bytes: 0, head: Buffer.alloc(0), tail: Buffer.alloc(0) };
        this.discard(sofar);
      } else {
        this.pending.push(piece);
        this.pendingBytes += piece.length;
      }
      if (nl === -1) break;
      if (this.discarding) {
        const { bytes, head, tail } = this.discarding;
        this.discarding = null;
        this.onOversized({ bytes, head, tail });
      } else {
        this.pending.push(Buffer.from('\n'));
        this.push(Buffer.concat(this.pending));
        this.pending = [];
        this.pendingBytes = 0;
      }
      start = nl + 1;
    }
    cb();
  }

  override _flush(cb: TransformCallback): void {
    if (this.discarding) {
      const { bytes, head, tail } = this.discarding;
      this.discarding = null;
      this.onOversized({ bytes, head, tail });
    } else if (this.pendingBytes > 0) {
      this.push(Buffer.concat(this.pending));
    }
    cb();
  }

  private discard(piece: Buffer): void {
    const d = this.discarding!;
    if (d.head.length < KEEP) d.head = Buffer.concat([d.head, piece.subarray(0, KEEP - d.head.length)]);
    const tail = Buffer.concat([d.tail, piece]);
    d.tail = tail.length > KEEP ? Buffer.from(tail.subarray(tail.length - KEEP)) : tail;
    d.bytes += piece.length;
  }
}

const ID = String.raw`(-?\d{1,15}|"(?:[^"\\]|\\.){0,200}")`;
/** Clients that put the id last (the TypeScript SDK: `{"method":…,"params":…,"jsonrpc":"2.0","id":7}`). */
const ID_AT_END = new RegExp(String.raw`"id"\s*:\s*${ID}\s*\}\s*$`);
/** Clients that put it first (`{"jsonrpc":"2.0","id":7,"method":…`). */
const ID_AT_START = new RegExp(String.raw`^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*${ID}`);

/**
 * The JSON-RPC id of a message known only by its first and last bytes, or
 * undefined when it cannot be told (then there is no one to answer). Only the
 * top-level id qualifies: the closing brace of the message must follow it, or
 * it must open the message.
 */
export function requestIdOf(head: Buffer, tail: Buffer): string | number | undefined {
  const m = ID_AT_END.exec(tail.toString('utf8')) ?? ID_AT_START.exec(head.toString('utf8'));
  if (!m) return undefined;
  try {
    return JSON.parse(m[1]!) as string | number;
  } catch {
    return undefined;
  }
}
