/**
 * The page's Markdown parser (pure half) [SURF-2]: structure in, plain
 * objects out. What matters most: raw HTML stays text, only http(s) and
 * mailto links are links, and hostile input costs bounded work.
 */
import { describe, expect, it } from 'vitest';
import { parseInline, parseMarkdown, safeHref, recordHref, MAX_DEPTH, type Block, type Inline } from './markdown.js';

/** Every text a tree would show, concatenated (what textContent would be). */
function textOf(nodes: Array<Block | Inline>): string {
  return nodes.map((n) => {
    switch (n.type) {
      case 'text': case 'code': return n.text;
      case 'strong': case 'em': case 'link': return textOf(n.children);
      case 'wikilink': return n.text;
      case 'image': return n.alt;
      case 'break': return '\n';
      case 'heading': case 'paragraph': return textOf(n.inline);
      case 'quote': return textOf(n.blocks);
      case 'list': return n.items.map(textOf).join('\n');
      case 'table': return [...n.head, ...n.rows.flat()].map(textOf).join(' ');
      default: return '';
    }
  }).join('');
}

describe('parseMarkdown: blocks', () => {
  it('reads headings, paragraphs, fenced code, quotes, rules and lists', () => {
    const b = parseMarkdown('# Title\n\nSome *text*.\n\n```js\nlet x = "<b>";\n```\n\n> quoted\n\n---\n\n- one\n- two\n\n3. three\n4. four\n');
    expect(b.map((x) => x.type)).toEqual(['heading', 'paragraph', 'code', 'quote', 'rule', 'list', 'list']);
    expect(b[0]).toMatchObject({ type: 'heading', level: 1 });
    expect(b[2]).toEqual({ type: 'code', lang: 'js', text: 'let x = "<b>";' });
    expect(b[5]).toMatchObject({ type: 'list', ordered: false, items: [expect.anything(), expect.anything()] });
    expect(b[6]).toMatchObject({ type: 'list', ordered: true, start: 3 });
  });

  it('nests an indented list inside an item', () => {
    const [list] = parseMarkdown('- a\n  - a1\n  - a2\n- b\n') as [Extract<Block, { type: 'list' }>];
    expect(list.items).toHaveLength(2);
    expect(list.items[0]!.map((x) => x.type)).toEqual(['paragraph', 'list']);
  });

  it('reads a simple table with alignment', () => {
    const [t] = parseMarkdown('| a | b |\n|:--|--:|\n| 1 | 2 |\n') as [Extract<Block, { type: 'table' }>];
    expect(t.type).toBe('table');
    expect(t.align).toEqual(['left', 'right']);
    expect(t.rows).toHaveLength(1);
  });

  it('keeps raw HTML as text, never as markup', () => {
    const src = '<script>alert(1)</script>\n\n<img src=x onerror="alert(2)">';
    const b = parseMarkdown(src);
    expect(b.every((x) => x.type === 'paragraph')).toBe(true);
    expect(textOf(b)).toContain('<script>alert(1)</script>');
    expect(textOf(b)).toContain('<img src=x onerror="alert(2)">');
  });

  it('an unclosed fence runs to the end instead of failing', () => {
    expect(parseMarkdown('```\ncode\nmore')).toEqual([{ type: 'code', lang: '', text: 'code\nmore' }]);
  });

  it('turns nesting deeper than MAX_DEPTH into text', () => {
    const deep = '>'.repeat(MAX_DEPTH + 20) + ' bottom';
    const b = parseMarkdown(deep);
    expect(textOf(b)).toContain('bottom');
  });
});

describe('parseInline', () => {
  it('reads emphasis, code spans, wiki links and links', () => {
    expect(parseInline('**bold** and *it* and `x < y`')).toEqual([
      { type: 'strong', children: [{ type: 'text', text: 'bold' }] },
      { type: 'text', text: ' and ' },
      { type: 'em', children: [{ type: 'text', text: 'it' }] },
      { type: 'text', text: ' and ' },
      { type: 'code', text: 'x < y' },
    ]);
    expect(parseInline('see [[rec-1|the record]]')).toEqual([{ type: 'text', text: 'see ' }, { type: 'wikilink', target: 'rec-1', text: 'the record' }]);
    expect(parseInline('[docs](https://example.com/a_(b) "t")')).toEqual([{ type: 'link', href: 'https://example.com/a_(b)', children: [{ type: 'text', text: 'docs' }] }]);
  });

  it('keeps snake_case words and lone stars as text', () => {
    expect(textOf(parseInline('a snake_case_name and 2 * 3 * 4'))).toBe('a snake_case_name and 2 * 3 * 4');
    expect(parseInline('snake_case_name')).toEqual([{ type: 'text', text: 'snake_case_name' }]);
  });

  it('backslash escapes punctuation', () => {
    expect(parseInline('\\*not em\\*')).toEqual([{ type: 'text', text: '*not em*' }]);
  });

  it('keeps an image as a node the renderer never loads', () => {
    expect(parseInline('![logo](https://cdn.example/x.png)')).toEqual([{ type: 'image', alt: 'logo', src: 'https://cdn.example/x.png' }]);
  });

  it('costs bounded work on many unclosed delimiters', () => {
    const hostile = '**a '.repeat(20_000) + '[x'.repeat(20_000) + '`'.repeat(3) + ' _b'.repeat(20_000);
    const t0 = performance.now();
    const out = parseInline(hostile);
    expect(performance.now() - t0).toBeLessThan(2000);
    expect(textOf(out).length).toBeGreaterThan(100_000);
  });
});

describe('parseMarkdown: bounded work on long lines (a record may be one 1 MiB line)', () => {
  // Each took minutes before (a heading of 300k characters: 44-63 s in Chromium, 9.6 s for 100k in Node): line
  // patterns that backtracked, and a paragraph's text re-read at every line.
  it.each([
    ['a heading full of blanks', '# a' + ' '.repeat(500_000) + 'x'],
    ['a fence opening with a backtick in its info', '~~~' + 'a'.repeat(500_000) + '`'],
    ['a table delimiter row that fails at its end', 'a|b\n|' + '-|'.repeat(250_000) + 'x'],
    ['a paragraph of many lines with inner blanks', 'a    b\n'.repeat(28_500)],
    ['a list marker followed by blanks and a line separator', '-' + ' '.repeat(500_000) + '\u2028'],
    ['a heading closed by many #', '# x' + ' #'.repeat(250_000) + 'y'],
  ])('%s', (_what, text) => {
    const t0 = performance.now();
    const blocks = parseMarkdown(text);
    expect(performance.now() - t0).toBeLessThan(2000);
    expect(blocks.length).toBeGreaterThan(0);
  });

  it('reads what the hand-written line readers read: closing #s, fence info, delimiter rows, hard breaks', () => {
    expect(parseMarkdown('# Title ##\n## T#\n###   \n# #\n#5 not a heading')).toEqual([
      { type: 'heading', level: 1, inline: [{ type: 'text', text: 'Title' }] },
      { type: 'heading', level: 2, inline: [{ type: 'text', text: 'T#' }] },
      { type: 'heading', level: 3, inline: [] },
      { type: 'heading', level: 1, inline: [] },
      { type: 'paragraph', inline: [{ type: 'text', text: '#5 not a heading' }] },
    ]);
    expect(parseMarkdown('~~~ js extra\ncode\n~~~')).toEqual([{ type: 'code', lang: 'js', text: 'code' }]);
    expect(parseMarkdown('``` a`b\nx')).toEqual([{ type: 'paragraph', inline: [{ type: 'text', text: '``` a`b\nx' }] }]);
    expect(parseMarkdown('| a | b |\n|:-|-:|\n| 1 | 2 |')).toMatchObject([{ type: 'table', align: ['left', 'right'] }]);
    expect(parseMarkdown('| a | b |\n|-||\n')).toMatchObject([{ type: 'paragraph' }]);
    expect(parseInline('one  \ntwo \nthree')).toEqual([
      { type: 'text', text: 'one' }, { type: 'break' }, { type: 'text', text: 'two\nthree' },
    ]);
  });
});

describe('safeHref', () => {
  it.each([
    ['https://example.com/x', 'https://example.com/x'],
    ['HTTP://EXAMPLE.COM', 'HTTP://EXAMPLE.COM'],
    ['mailto:a@example.com', 'mailto:a@example.com'],
    ['javascript:alert(1)', null],
    [' javascript:alert(1)', null],
    ['JaVaScRiPt:alert(1)', null],
    ['java\tscript:alert(1)', null],
    ['data:text/html,<script>alert(1)</script>', null],
    ['vbscript:x', null],
    ['/api/records', null],
    ['../evidence/x.txt', null],
    ['#/record/x', null],
    ['//evil.example/x', null],
  ])('safeHref(%j) = %j', (href, expected) => {
    expect(safeHref(href)).toBe(expected);
  });

  it('record links are built from encoded ids', () => {
    expect(recordHref('a/../b?c#d')).toBe('#/record/a%2F..%2Fb%3Fc%23d');
  });
});
