import { describe, expect, test } from 'vitest';
import { ProxyConfigError } from '../errors.js';
import { parseProxyConfig } from './parse-config.js';

function issuesOf(input: unknown): Array<{ key: string; message: string }> {
  try {
    parseProxyConfig(input);
  } catch (err) {
    expect(err).toBeInstanceOf(ProxyConfigError);
    expect((err as ProxyConfigError).code).toBe('MOCRA_ERR_PROXY_CONFIG');
    return [...(err as ProxyConfigError).issues];
  }
  throw new Error('expected a ProxyConfigError');
}

describe('parseProxyConfig', () => {
  test('fills every default', () => {
    const c = parseProxyConfig({ proxies: ['http://1.2.3.4:8080'] });
    expect(c).toMatchObject({
      direct: false,
      minSize: 5,
      maxSize: 50,
      refillThreshold: 0.3,
      maxErrors: 3,
      retiredCooldown: 1_800_000,
      maxWait: 30_000,
      maintenanceInterval: 1_000,
      tiers: { escalateAfter: 2, deescalateAfter: 20, maxScopes: 10_000 },
      maxSessions: 10_000,
    });
    expect(c.proxies).toEqual([{ url: 'http://1.2.3.4:8080', provider: 'static', tier: 1 }]);
    expect(c.healthCheck).toBeUndefined();
    expect(c.rateLimit).toBeUndefined();
  });

  test('reads a TOML-shaped section: snake_case keys, durations with units, RFC 3339 instants', () => {
    // What a TOML parser returns for:
    //   [proxy]
    //   direct = true
    //   min_size = 2
    //   rate_limit = 5
    //   [[proxy.tunnels]] name = "t" endpoint = "gw.example:7000" username = "u" password = "p:w" tier = 2
    //   [[proxy.providers]] name = "list" url = "http://lists.example/p.txt" proxy_ttl = "10m" ...
    const c = parseProxyConfig({
      direct: true,
      min_size: 2,
      max_size: 4,
      rate_limit: 5,
      retired_cooldown: '0',
      health_check: { url: 'http://check.example/ok', interval: '1m', timeout: '3s' },
      tiers: { escalate_after: 1, deescalate_after: 0 },
      proxies: [
        { url: 'socks5://5.6.7.8:1080', provider: 'dc', tier: 1, expires_at: '2030-01-01T00:00:00Z' },
      ],
      tunnels: [{ name: 't', endpoint: 'gw.example:7000', username: 'u', password: 'p:w', tier: 2 }],
      providers: [
        {
          name: 'list',
          url: 'http://lists.example/p.txt',
          proxy_ttl: '10m',
          protocol: 'https',
          rate_limit: { limit: 60, interval: '1m' },
          headers: { authorization: 'Bearer x' },
          tier: 2,
        },
      ],
    });
    expect(c.direct).toBe(true);
    expect(c.minSize).toBe(2);
    expect(c.retiredCooldown).toBe(0);
    expect(c.healthCheck).toEqual({
      url: 'http://check.example/ok',
      interval: 60_000,
      timeout: 3_000,
      concurrency: 4,
    });
    expect(c.tiers).toEqual({ escalateAfter: 1, deescalateAfter: 0, maxScopes: 10_000 });
    expect(c.proxies[0]).toEqual({
      url: 'socks5://5.6.7.8:1080',
      provider: 'dc',
      tier: 1,
      rateLimit: { limit: 5, interval: 1_000 },
      expiresAt: Date.UTC(2030, 0, 1),
    });
    expect(c.tunnels[0]).toMatchObject({ name: 't', url: 'http://u:p%3Aw@gw.example:7000', tier: 2 });
    expect(c.providers[0]).toMatchObject({
      kind: 'list',
      name: 'list',
      proxyTtl: 600_000,
      protocol: 'https',
      minSize: 2,
      maxSize: 4,
      rateLimit: { limit: 60, interval: 60_000 },
      headers: { authorization: 'Bearer x' },
      timeout: 10_000,
      minLoadInterval: 10_000,
    });
  });

  test('accepts a function provider in code, and its own result unchanged', () => {
    const load = () => ['1.1.1.1:80'];
    const c = parseProxyConfig({ providers: [{ name: 'fn', load, max_size: 3 }] });
    expect(c.providers[0]).toMatchObject({ kind: 'function', name: 'fn', maxSize: 3, minSize: 3 });
    expect(parseProxyConfig(c)).toBe(c);
  });

  test('names the key of every problem, in one error', () => {
    const issues = issuesOf({
      min_size: -1,
      maxErrors: 1.5,
      refillThreshold: 2,
      colour: 'blue',
      maxWait: '5 minutes',
      proxies: ['http://ok.example:80', 'ftp://x:21', { url: 'http://ok.example:80' }, { tier: 'high' }, 7],
      tunnels: [
        { name: 'dup', endpoint: 'h:1' },
        { name: 'dup', endpoint: 'h:2', password: 'p' },
        { name: 'same', endpoint: 'http://ok.example:80' },
      ],
      providers: [
        { name: 'p', url: 'file:///etc/passwd', protocol: 'gopher', rate_limit: { interval: '1s' } },
        {},
      ],
      health_check: { interval: '1m' },
      tiers: { escalate_after: 0, bogus: 1 },
    });
    const byKey = Object.fromEntries(issues.map((i) => [i.key, i.message]));
    expect(byKey).toMatchObject({
      'proxy.min_size': expect.stringContaining('at least 0'),
      'proxy.maxErrors': expect.stringContaining('integer'),
      'proxy.refillThreshold': expect.stringContaining('at most 1'),
      'proxy.colour': expect.stringContaining('unknown key'),
      'proxy.maxWait': expect.stringContaining('duration'),
      'proxy.proxies[1]': expect.stringContaining("scheme 'ftp'"),
      'proxy.proxies[2].url': expect.stringContaining('duplicate'),
      'proxy.proxies[3].url': 'is required',
      'proxy.proxies[3].tier': expect.stringContaining('integer'),
      'proxy.proxies[4]': expect.stringContaining('expected a table'),
      'proxy.tunnels[1].name': expect.stringContaining("'dup' is already used"),
      'proxy.tunnels[1].password': 'needs a username',
      'proxy.tunnels[2].endpoint': expect.stringContaining('duplicate proxy (also at proxy.proxies[0])'),
      'proxy.providers[0].url': expect.stringContaining('http(s) URL'),
      'proxy.providers[0].protocol': expect.stringContaining('gopher'),
      'proxy.providers[0].rate_limit.limit': 'is required',
      'proxy.providers[1].name': 'is required',
      'proxy.providers[1].url': expect.stringContaining('is required'),
      'proxy.health_check.url': 'is required',
      'proxy.tiers.escalate_after': expect.stringContaining('at least 1'),
      'proxy.tiers.bogus': expect.stringContaining('unknown key'),
    });
    expect(issues).toHaveLength(21);
  });

  test('guards the tier ladder and provider names', () => {
    expect(issuesOf({ direct: true, proxies: [{ url: 'h:1', tier: 0 }] })).toEqual([
      { key: 'proxy.proxies[0].tier', message: 'must be at least 1: tier 0 is the direct tier' },
    ]);
    expect(
      issuesOf({
        proxies: [
          { url: 'h:1', tier: 1 },
          { url: 'h:2', tier: 2 },
        ],
      })[0]!.message,
    ).toContain("provider 'static' already has tier 1");
    expect(issuesOf({ proxies: ['h:1'], providers: [{ name: 'static', url: 'http://x/' }] })[0]).toEqual({
      key: 'proxy.providers[0].name',
      message: "provider name 'static' is already used",
    });
  });

  test('rejects sections that are not tables, empty pools and contradictions', () => {
    expect(issuesOf('http://1.2.3.4:80')).toEqual([
      { key: 'proxy', message: "expected a table, got 'http://1.2.3.4:80'" },
    ]);
    expect(issuesOf({})[0]!.message).toContain('at least one of');
    expect(issuesOf({ direct: 'yes' })[0]).toEqual({
      key: 'proxy.direct',
      message: "expected true or false, got 'yes'",
    });
    expect(issuesOf({ proxies: ['h:1'], min_size: 9, max_size: 3 })[0]!.key).toBe('proxy.min_size');
    expect(issuesOf({ proxies: ['h:1'], minSize: 1, min_size: 2 })[0]).toEqual({
      key: 'proxy.min_size',
      message: "given twice (also as 'minSize')",
    });
    expect(issuesOf({ providers: [{ name: 'f', load: () => [], url: 'http://x/' }] })[0]!.message).toContain(
      'not both',
    );
    expect(issuesOf({ providers: [{ name: 'f', load: 'fn' }] })[0]!.message).toContain('expected a function');
    expect(issuesOf({ providers: [{ name: 'f', load: () => [], timeout: '1s' }] })[0]!.key).toBe(
      'proxy.providers[0].timeout',
    );
    expect(issuesOf({ proxies: [{ url: 'h:1', expires_at: 'tomorrow' }] })[0]!.key).toBe(
      'proxy.proxies[0].expires_at',
    );
  });

  test('uses a custom root in key names', () => {
    expect(() => parseProxyConfig({ nope: 1, direct: true }, { root: 'config.proxy' })).toThrow(
      /config\.proxy\.nope: unknown key/,
    );
  });
});
