/**
 * Commit trailers, read by Knowledge itself [GIT-6, GIT-11, GIT-12].
 *
 * A retry finds its own commit by its `Knowledge-Batch` trailer, verify checks
 * every commit's trailers, and history labels versions by them. Git's
 * `%(trailers)` placeholder obeys the repository's `trailer.*` configuration:
 * `trailer.separators=#` hides every `Key: value` line, and
 * `trailer.<token>.key` renames tokens that begin like <token> (measured with
 * git 2.39: `trailer.Knowledge-Batch.key=Foo` turns our trailers into `Foo`).
 * A command-line override cannot remove a configured token, so Knowledge asks
 * git for the raw message (`%B`) and applies git's own default rules here,
 * with no configuration at all:
 *
 * - the trailers are the message's last paragraph (after the last blank
 *   line); the first paragraph (the subject) never is;
 * - a trailer line is `Token: value`, the token made of letters, digits and
 *   `-`, optionally followed by spaces before the `:`; a line starting with
 *   white space continues the line above it (a trailer's value, unfolded
 *   with one space);
 * - the paragraph counts when every line is a trailer, or when it holds a
 *   git-generated line (`Signed-off-by: `, `(cherry picked from commit `) and
 *   at least a quarter of its lines are trailers.
 *
 * Tokens compare without regard to case, as `%(trailers:key=…)` does.
 * Two corners of git's are left out, since no message Knowledge writes has
 * them: a trailing run of comment lines (`#`) and a `Conflicts:` block, which
 * git skips before looking for the last paragraph. A property test compares
 * this parser with git's on generated messages (trailers.test.ts).
 */

const TRAILER_RE = /^([A-Za-z0-9-]+)[ \t]*:([^]*)$/;
const GIT_GENERATED = ['Signed-off-by: ', '(cherry picked from commit '];

export class Trailers {
  private readonly byKey = new Map<string, string[]>();
  /** Every trailer in message order, tokens as written. */
  readonly entries: Array<[token: string, value: string]> = [];

  add(token: string, value: string): void {
    this.entries.push([token, value]);
    const key = token.toLowerCase();
    const list = this.byKey.get(key);
    if (list) list.push(value);
    else this.byKey.set(key, [value]);
  }

  /** Every value of `token`, in message order (empty when none). */
  values(token: string): string[] {
    return this.byKey.get(token.toLowerCase()) ?? [];
  }

  /** The first value of `token`, or undefined. */
  first(token: string): string | undefined {
    return this.values(token)[0];
  }
}

const trimAscii = (s: string) => s.replace(/^[ \t\r\n]+|[ \t\r\n]+$/g, '');
/** Git's white space is ASCII's: a line of only these is blank. */
const isBlank = (line: string) => /^[ \t\r]*$/.test(line);

/** The trailers of a raw commit message (`git log --format=%B`), by git's default rules. */
export function parseTrailers(message: string): Trailers {
  const out = new Trailers();
  const lines = message.split('\n');
  // Trailing blank lines do not end the last paragraph.
  let end = lines.length;
  while (end > 0 && isBlank(lines[end - 1]!)) end--;
  let start = end;
  while (start > 0 && !isBlank(lines[start - 1]!)) start--;
  // A message of one paragraph is all subject (blank lines before it are not a paragraph: git skips them).
  let first = 0;
  while (first < end && isBlank(lines[first]!)) first++;
  if (start <= first) return out;
  const block = lines.slice(start, end);

  const found: Array<[string, string]> = [];
  let trailerLines = 0;
  let otherLines = 0;
  let generated = false;
  /** What the line above was: a continuation belongs to it (and counts as it does, when that was free text). */
  let above: 'trailer' | 'generated' | 'other' | null = null;
  for (const line of block) {
    if (/^[ \t\r]/.test(line)) {
      if (above === 'trailer') found[found.length - 1]![1] += `\n${line}`;
      else if (above !== 'generated') otherLines++;
      continue;
    }
    const m = TRAILER_RE.exec(line);
    if (GIT_GENERATED.some((p) => line.startsWith(p))) {
      generated = true;
      trailerLines++;
      // `(cherry picked from commit …)` is a trailer line to git, with no token to report.
      if (m) found.push([m[1]!, m[2]!]);
      above = m ? 'trailer' : 'generated';
    } else if (m) {
      trailerLines++;
      found.push([m[1]!, m[2]!]);
      above = 'trailer';
    } else {
      otherLines++;
      above = 'other';
    }
  }
  const isBlock = (trailerLines > 0 && otherLines === 0) || (generated && trailerLines * 3 >= otherLines);
  if (!isBlock) return out;
  // As `%(trailers:unfold)`: continuation lines fold into one space, the edges trimmed.
  for (const [token, value] of found) out.add(token, trimAscii(trimAscii(value).replace(/\n[ \t\r\n]*/g, ' ')));
  return out;
}

/**
 * The subject of a raw commit message, as `%s` prints it: the first paragraph
 * (blank lines before it skipped), each line without its trailing white
 * space, joined by single spaces.
 */
export function messageSubject(message: string): string {
  const lines = message.split('\n');
  let i = 0;
  while (i < lines.length && isBlank(lines[i]!)) i++;
  const parts: string[] = [];
  for (; i < lines.length; i++) {
    const line = lines[i]!.replace(/[ \t\r]+$/, '');
    if (line === '') break;
    parts.push(line);
  }
  return parts.join(' ');
}

/** `git log -z` with this format prints, per commit, its id, its parents and its raw message. */
export const COMMIT_MESSAGE_FORMAT = '--format=%H %P%x01%B';

/**
 * The commits of `git log -z COMMIT_MESSAGE_FORMAT`, in git's order, each with
 * its trailers (the message itself may hold \x01: the first one ends the ids).
 */
export function parseCommitMessages(out: string): Array<{ commit: string; parents: string[]; trailers: Trailers }> {
  const commits: Array<{ commit: string; parents: string[]; trailers: Trailers }> = [];
  for (const rec of out.split('\0')) {
    const sep = rec.indexOf('\x01');
    if (sep < 0) continue;
    const [commit = '', ...parents] = rec.slice(0, sep).trim().split(' ');
    commits.push({ commit, parents: parents.filter(Boolean), trailers: parseTrailers(rec.slice(sep + 1)) });
  }
  return commits;
}
