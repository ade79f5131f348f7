/**
 * A bound on one JSON-RPC message from stdin. The SDK's stdio transport
 * buffers a whole line before parsing it, and on overflow drops its buffer
 * and closes the connection. This filter sits in front of it: lines up to
 * the limit pass through unchanged; a longer line is discarded as it streams
 * (memory stays bounded) and reported, so the server can answer that one
 * request with E_TOO_LARGE and keep serving.
 */
import { Transform, type TransformCallback } from 'node:stream';


export interface OversizedLine {
  /** Length of the discarded line in bytes (without its newline). */
  bytes: number;
  /** Its top-level JSON-RPC id, found as it streamed (undefined: none, so no one to answer). */
  id: string | number | undefined;
}

export class LineLimit extends Transform {
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private discarding: { bytes: number; id: TopLevelId } | null = null;

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
        this.discarding = { bytes: 0, id: new TopLevelId() };
        this.discard(sofar);
      } else {
        this.pending.push(piece);
        this.pendingBytes += piece.length;
      }
      if (nl === -1) break;
      if (this.discarding) this.reportDiscarded();
      else {
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
    if (this.discarding) this.reportDiscarded();
    else if (this.pendingBytes > 0) {
      this.push(Buffer.concat(this.pending));
    }
    cb();
  }

  private discard(piece: Buffer): void {
    const d = this.discarding!;
    d.id.feed(piece);
    d.bytes += piece.length;
  }

  private reportDiscarded(): void {
    const { bytes, id } = this.discarding!;
    this.discarding = null;
    this.onOversized({ bytes, id: id.id });
  }
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
/** Longest raw key or id text kept: a longer one is not the request id (ids are short). */
const KEY_MAX = 16;
const VALUE_MAX = 512;

/**
 * The top-level "id" of one JSON object fed in pieces, in constant memory:
 * a scanner that tracks only nesting and strings, wherever the key stands
 * (first, last, or between a method and huge params). Only a string or
 * number qualifies; with the key twice, the last wins (as in JSON.parse).
 */
export class TopLevelId {
  private depth = 0;
  private inString = false;
  private escaped = false;
  /** At depth 1, the next string is a key. */
  private expectKey = false;
  /** Raw bytes of the depth-1 key being read (null: not a key, or too long). */
  private key: number[] | null = null;
  private readingKey = false;
  private keyIsId = false;
  /** Raw bytes of the id's value being read. */
  private value: number[] | null = null;
  private found: string | number | undefined;

  get id(): string | number | undefined {
    return this.found;
  }

  feed(buf: Buffer): void {
    for (let i = 0; i < buf.length; i++) {
      const c = buf[i]!;
      if (this.inString) {
        if (this.escaped) this.escaped = false;
        else if (c === BACKSLASH) this.escaped = true;
        else if (c === QUOTE) {
          this.inString = false;
          if (this.readingKey) this.endKey();
        }
        if (this.inString && this.readingKey && this.key) {
          if (this.key.length < KEY_MAX) this.key.push(c);
          else this.key = null;
        }
        this.keep(c);
        continue;
      }
      if (this.value && this.depth === 1 && (c === 0x2c || c === 0x7d)) this.endValue(); // ',' or '}' ends it
      this.keep(c);
      switch (c) {
        case QUOTE:
          this.inString = true;
          this.readingKey = this.depth === 1 && this.expectKey;
          if (this.readingKey) {
            this.key = [];
            this.expectKey = false;
          }
          break;
        case 0x7b: // {
          this.depth++;
          if (this.depth === 1) this.expectKey = true;
          break;
        case 0x5b: // [
          this.depth++;
          break;
        case 0x7d: // }
        case 0x5d: // ]
          this.depth--;
          break;
        case 0x2c: // ,
          if (this.depth === 1) this.expectKey = true;
          break;
        case 0x3a: // :
          if (this.depth === 1 && this.keyIsId) this.value = [];
          this.keyIsId = false;
          break;
      }
    }
  }

  private keep(c: number): void {
    if (!this.value) return;
    if (this.value.length < VALUE_MAX) this.value.push(c);
    else this.value = null; // too long for an id
  }

  private endKey(): void {
    this.readingKey = false;
    this.keyIsId = false;
    if (!this.key) return;
    try {
      this.keyIsId = JSON.parse(`"${Buffer.from(this.key).toString('utf8')}"`) === 'id';
    } catch {
      // not a valid key: not the id
    }
    this.key = null;
  }

  private endValue(): void {
    const text = Buffer.from(this.value!).toString('utf8');
    this.value = null;
    try {
      const v = JSON.parse(text) as unknown;
      if (typeof v === 'string' || (typeof v === 'number' && Number.isFinite(v))) this.found = v;
    } catch {
      // not a JSON value: no id to answer
    }
  }
}
