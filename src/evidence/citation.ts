/**
 * A citation checked against the source it cites [REC-1]: its inclusive line
 * range must lie within the source, and its quote must be the source's exact
 * words (within those lines, when given). Only a source that is UTF-8 text of
 * at most CHECKED_SOURCE_MAX_BYTES can be read this way; any other (a PDF, an
 * image, a very large log) is cited as given. Line endings count as one:
 * CRLF, CR and LF all end a line, in the source and in the quote alike.
 */
import type { Citation } from '../records/types.js';

/** Sources larger than this are not read to check a citation (README: publication limits). */
export const CHECKED_SOURCE_MAX_BYTES = 16 * 1024 * 1024;

const decoder = new TextDecoder('utf-8', { fatal: true });

function lf(text: string): string {
  return text.replace(/\r\n?/g, '\n');
}

/** The source's text, or null when it cannot be checked (not UTF-8 text, or too large). */
export function citableText(bytes: Buffer): string | null {
  if (bytes.length > CHECKED_SOURCE_MAX_BYTES || bytes.includes(0)) return null;
  try {
    return lf(decoder.decode(bytes));
  } catch {
    return null;
  }
}

/** Why `c` does not hold against the source's `text` (from citableText), or null when it does. */
export function citationProblem(c: Citation, text: string): string | null {
  if (c.lines === undefined && c.quote === undefined) return null;
  const lines = text === '' ? [] : text.split('\n');
  if (text.endsWith('\n')) lines.pop(); // the last line's end, not a line of its own
  let scope = text;
  if (c.lines !== undefined) {
    const [first, last] = c.lines;
    if (last > lines.length) return `cites lines ${first}-${last} of source ${c.source}, which has ${lines.length} line${lines.length === 1 ? '' : 's'}`;
    scope = lines.slice(first - 1, last).join('\n');
  }
  if (c.quote !== undefined && !scope.includes(lf(c.quote))) {
    return `quotes words that are not in source ${c.source}${c.lines !== undefined ? ` (lines ${c.lines[0]}-${c.lines[1]})` : ''}: a quote must be the source's exact text`;
  }
  return null;
}
