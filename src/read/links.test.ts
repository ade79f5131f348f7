import { describe, expect, it } from 'vitest';
import { bodyLinksTo, metaLinks, recordLinks, wikiLinks } from './links.js';

describe('record links [READ-1]', () => {
  it('finds [[id]] and [[id|label]] wiki links, once each, in order', () => {
    expect(wikiLinks('See [[rec-b]] and [[rec-a|the other]], again [[rec-b]].')).toEqual(['rec-b', 'rec-a']);
  });

  it('ignores titles, empty and malformed links', () => {
    expect(wikiLinks('[[Some title with spaces]] [[]] [rec-x] [[rec-y] [[bad/id]]')).toEqual([]);
  });

  it('bodyLinksTo needs the whole id, not a prefix', () => {
    expect(bodyLinksTo('[[rec-10]]', 'rec-1')).toBe(false);
    expect(bodyLinksTo('[[rec-1]]', 'rec-1')).toBe(true);
    expect(bodyLinksTo('[[rec-1|label]]', 'rec-1')).toBe(true);
  });

  it('frontmatter links: dependencies, then from and to', () => {
    expect(metaLinks({ dependencies: ['a', 3, 'b'], from: 'c', to: 'd' })).toEqual(['a', 'b', 'c', 'd']);
    expect(metaLinks({ dependencies: 'a' })).toEqual([]);
  });

  it('all links are de-duplicated and never include the record itself', () => {
    expect(recordLinks('self', { dependencies: ['a', 'self'], from: 'a', to: 'b' }, '[[b]] [[c]] [[self]]')).toEqual(['a', 'b', 'c']);
  });
});
