/**
 * Text as a terminal may show it: every piece of the CLI's human (non
 * `--json`) output that a record, a file name, Git or a caller supplied goes
 * through here, so that none of it can send escape sequences to the terminal
 * (clear the screen, recolour it, retitle the window: any agent can publish a
 * body) or fake lines of the output. Control characters (C0, DEL, C1) are
 * shown as `\xNN`. `--json` output is the value unchanged: JSON escapes them
 * as it does.
 */

/** A control character (C0, DEL, C1), a backslash, or a bidi embedding, override or isolate. */
// eslint-disable-next-line no-control-regex
const IN_ONE_LINE = /[\u0000-\u001f\u007f-\u009f\\\u202a-\u202e\u2066-\u2069]/g;

/** A control character other than tab and line feed; a carriage return unless it ends a line (CRLF); a bidi control. */
// eslint-disable-next-line no-control-regex
const IN_TEXT = /\r(?!\n)|[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

function escaped(c: string): string {
  if (c === '\\') return '\\\\';
  const code = c.charCodeAt(0);
  return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16)}`;
}

/**
 * A one-line field (a name, a path, a title, a snippet, a reason): control
 * characters as `\xNN`, line breaks and tabs included, so it can neither
 * send escape sequences nor fake lines of the output; a backslash as `\\`,
 * so a name that holds a literal `\x0a` reads differently from one holding
 * a line break; and the bidi controls (U+202A–U+202E, U+2066–U+2069) as
 * `\u202e`, so a field cannot reorder the rest of its line (a path that
 * shows another extension than it has).
 */
export function shown(s: string): string {
  return s.replace(IN_ONE_LINE, escaped);
}

/**
 * Text printed on purpose as several lines (a record's body, a diff, an
 * error message): as written, with its line breaks and tabs, but every other
 * control character as `\xNN` (a carriage return too, unless it ends a CRLF
 * line: alone, it would let a line overwrite itself) and the bidi controls
 * as `\u202e`, as in {@link shown} (a diff holds titles and paths, and a line
 * of text reordered is the "Trojan Source" trick). Backslashes are left as
 * written: it is the text a person wrote, and `--json` gives it exactly.
 */
export function shownText(s: string): string {
  return s.replace(IN_TEXT, escaped);
}

/**
 * A `warning:` line on stderr, as an error's line is (main.ts errorLine): one line whatever the warning holds (a path,
 * Git's own words), so it can neither fake a line of the output nor send escape sequences ({@link shownText}).
 */
export function warningLine(warning: string): string {
  return `warning: ${shownText(oneLine(warning))}\n`;
}

/** A message made one line: each line break, with the spaces around it, as one space. */
export function oneLine(s: string): string {
  return s.replace(/\s*\n\s*/g, ' ').trim();
}

/** An internal error's report on stderr: its stack, several lines on purpose, escaped as {@link shownText}. */
export function internalErrorLines(err: unknown): string {
  return `E_INTERNAL: ${shownText(err instanceof Error ? err.stack ?? err.message : String(err))}\n`;
}
