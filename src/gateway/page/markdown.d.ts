/** Types of ./markdown.js (a browser module; this file lets TypeScript tests import it). */
export type Inline =
  | { type: 'text'; text: string }
  | { type: 'code'; text: string }
  | { type: 'strong' | 'em'; children: Inline[] }
  | { type: 'break' }
  | { type: 'wikilink'; target: string; text: string }
  | { type: 'link'; href: string; children: Inline[] }
  | { type: 'image'; alt: string; src: string };

export type Block =
  | { type: 'heading'; level: number; inline: Inline[] }
  | { type: 'paragraph'; inline: Inline[] }
  | { type: 'code'; lang: string; text: string }
  | { type: 'quote'; blocks: Block[] }
  | { type: 'list'; ordered: boolean; start: number; items: Block[][] }
  | { type: 'rule' }
  | { type: 'table'; align: string[]; head: Inline[][]; rows: Inline[][][] };

export const MAX_DEPTH: number;
export function parseMarkdown(text: string): Block[];
export function parseInline(text: string, depth?: number): Inline[];
export function safeHref(href: string): string | null;
export function recordHref(id: string): string;
export function renderMarkdown(text: string, doc: Document, opts?: { headingOffset?: number }): DocumentFragment;
