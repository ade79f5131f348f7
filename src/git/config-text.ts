/** Reading a repository's config file in-process, only where that reading cannot differ from git's. */

/**
 * Pure: the section headers of one config file, as git reads them, or null
 * when this reading might differ from git's, so git must answer. Git takes
 * several headers on one line (`[core] [filter "x"]`) and a key after a
 * header (`[filter "x"] clean = …`); a carriage return or a byte-order mark,
 * or a `[` that does not open a header this reads, means null.
 */
export function configSections(text: string): Array<{ section: string; subsection?: string }> | null {
  if (text.includes('\r') || text.startsWith('\uFEFF')) return null;
  const out: Array<{ section: string; subsection?: string }> = [];
  const header = /\[([A-Za-z0-9.-]+)(?:[ \t]+"((?:[^"\\\n]|\\.)*)")?\]/y;
  for (const line of text.split('\n')) {
    let at = 0;
    for (;;) {
      while (line[at] === ' ' || line[at] === '\t') at++;
      if (line[at] !== '[') break;
      header.lastIndex = at;
      const m = header.exec(line);
      if (!m) return null; // a header we cannot read: let git answer
      const subsection = m[2] === undefined ? undefined : m[2].replace(/\\(.)/g, '$1');
      out.push(subsection === undefined ? { section: m[1]! } : { section: m[1]!, subsection });
      at = header.lastIndex;
    }
  }
  return out;
}

/** Whether a config file's sections include other files (which only git can then read). */
export function includesOtherFiles(sections: ReadonlyArray<{ section: string }>): boolean {
  return sections.some(({ section: s }) => {
    const lower = s.toLowerCase();
    return lower === 'include' || lower === 'includeif' || lower.startsWith('include.') || lower.startsWith('includeif.');
  });
}
