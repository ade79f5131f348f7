/**
 * Whether a word of user text gives FTS5 at least one token [READ-1]: a
 * word that gives none must be dropped from a query (as its own phrase it
 * matches nothing, so `all` would find nothing), and a word that gives one
 * must be kept (left out of a phrase, the phrase can no longer match the
 * text that holds it).
 *
 * unicode61 goes by Unicode 6.1: it keeps letters, digits and private-use
 * characters (L*, N*, Co) of its time and every code point 6.1 left
 * unassigned, so newer emoji, skin-tone modifiers and currency signs are
 * tokens, while a few characters that are letters today (New Tai Lue vowel
 * signs, two Vedic signs) were marks then, and separate words. JavaScript's
 * Unicode is not that table: a word is asked of the tokenizer itself — the
 * bundled SQLite, in an in-memory table made like records_fts — unless it
 * has a letter or digit both agree on.
 */
import Database from 'better-sqlite3';

/** records_fts's tokenizer (migration 003; tokens.test.ts checks that they agree). */
export const FTS_TOKENIZER = 'unicode61 remove_diacritics 2';

/**
 * Letters today that were marks in Unicode 6.1, and the noncharacters U+FFFE and U+FFFF: unicode61 separates words
 * at them (measured, tokens.test.ts).
 */
const SEPARATING = /[\u19B0-\u19C0\u19C8\u19C9\u1CF2\u1CF3\uFFFE\uFFFF]/gu;
/** Letters, digits, private use, and code points unassigned still (so unassigned in 6.1 too): tokens for both. */
const WORD_CHAR = /[\p{L}\p{N}\p{Co}\p{Cn}]/u;

interface Probe { put: Database.Statement; count: Database.Statement; clear: Database.Statement }
let probe: Probe | null = null;
const asked = new Map<string, boolean>();
const ASKED_MAX = 4096;

function openProbe(): Probe {
  const db = new Database(':memory:');
  db.exec(`CREATE VIRTUAL TABLE t USING fts5(x, tokenize = '${FTS_TOKENIZER}'); CREATE VIRTUAL TABLE v USING fts5vocab(t, 'row');`);
  return { put: db.prepare('INSERT INTO t(rowid, x) VALUES (1, ?)'), count: db.prepare('SELECT count(*) FROM v').pluck(), clear: db.prepare('DELETE FROM t') };
}

export function givesToken(word: string): boolean {
  if (WORD_CHAR.test(word.replace(SEPARATING, ' '))) return true;
  const known = asked.get(word);
  if (known !== undefined) return known;
  probe ??= openProbe();
  probe.put.run(word);
  const tokens = probe.count.get() as number;
  probe.clear.run();
  if (asked.size >= ASKED_MAX) asked.clear();
  asked.set(word, tokens > 0);
  return tokens > 0;
}
