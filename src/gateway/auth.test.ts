/** Who may talk to the Gateway: loopback detection, bearer tokens, Host and same-origin checks [SURF-2]. */
import { describe, expect, it } from 'vitest';
import { bearerMatches, hostAllowed, isLoopbackHost, loopbackHostHeaders, sameOriginWrite } from './auth.js';

describe('isLoopbackHost', () => {
  it.each([
    ['127.0.0.1', true], ['127.1.2.3', true], ['localhost', true], ['::1', true], ['[::1]', true],
    ['0.0.0.0', false], ['::', false], ['192.168.1.5', false], ['example.com', false], ['127.0.0.1.example.com', false], ['localhost.example', false],
  ])('%s -> %s', (host, loopback) => {
    expect(isLoopbackHost(host)).toBe(loopback);
  });
});

describe('bearerMatches', () => {
  const token = 'a-long-enough-token-123';
  it('accepts exactly the token, as a Bearer credential', () => {
    expect(bearerMatches(token, `Bearer ${token}`)).toBe(true);
    expect(bearerMatches(token, `bearer ${token}`)).toBe(true);
  });
  it.each([undefined, '', token, `Basic ${token}`, `Bearer ${token}x`, `Bearer ${token.slice(0, -1)}`, 'Bearer ', `Bearer ${token} extra`])('refuses %j', (header) => {
    expect(bearerMatches(token, header)).toBe(false);
  });
});

describe('Host and Origin checks', () => {
  it('a loopback Gateway answers to its loopback names on its port only', () => {
    const allowed = loopbackHostHeaders('127.0.0.1', 8484);
    expect(hostAllowed('127.0.0.1:8484', allowed)).toBe(true);
    expect(hostAllowed('LOCALHOST:8484', allowed)).toBe(true);
    expect(hostAllowed('[::1]:8484', allowed)).toBe(true);
    expect(hostAllowed('evil.example:8484', allowed)).toBe(false);
    expect(hostAllowed('127.0.0.1:9999', allowed)).toBe(false);
    expect(hostAllowed(undefined, allowed)).toBe(false);
  });

  it('a write is same-origin only with the marker header and no foreign Origin', () => {
    const own = 'http://127.0.0.1:8484';
    expect(sameOriginWrite({ marker: '1', origin: undefined }, own)).toBe(true);
    expect(sameOriginWrite({ marker: '1', origin: own }, own)).toBe(true);
    expect(sameOriginWrite({ marker: undefined, origin: own }, own)).toBe(false);
    expect(sameOriginWrite({ marker: '1', origin: 'http://evil.example' }, own)).toBe(false);
    expect(sameOriginWrite({ marker: '1', origin: 'null' }, own)).toBe(false);
  });
});
