import { describe, expect, test } from 'vitest';
import { ProxyAddressError } from '../errors.js';
import { parseProxyAddress, parseProxyList } from './proxy-address.js';

describe('parseProxyAddress', () => {
  test('reads URLs of every supported scheme, with default ports', () => {
    expect(parseProxyAddress('http://10.0.0.1:8080')).toMatchObject({
      protocol: 'http',
      host: '10.0.0.1',
      port: 8080,
      url: 'http://10.0.0.1:8080',
      id: 'http://10.0.0.1:8080',
    });
    expect(parseProxyAddress('https://proxy.example').port).toBe(443);
    expect(parseProxyAddress('socks5://proxy.example').port).toBe(1080);
    expect(parseProxyAddress('socks://h:1').protocol).toBe('socks5');
    expect(parseProxyAddress('HTTP://Proxy.Example:81/').url).toBe('http://proxy.example:81');
  });

  test('keeps credentials in url only: id drops the password, displayUrl masks it', () => {
    const a = parseProxyAddress('http://us%40er:p%3Ass@1.2.3.4:3128');
    expect(a.username).toBe('us@er');
    expect(a.password).toBe('p:ss');
    expect(a.url).toBe('http://us%40er:p%3Ass@1.2.3.4:3128');
    expect(a.id).toBe('http://us%40er@1.2.3.4:3128');
    expect(a.displayUrl).toBe('http://us%40er:***@1.2.3.4:3128');
  });

  test('reads the provider-list form ip:port[:user:pass] with a default scheme', () => {
    expect(parseProxyAddress('1.2.3.4:8080').url).toBe('http://1.2.3.4:8080');
    expect(parseProxyAddress('1.2.3.4:8080', 'socks5').url).toBe('socks5://1.2.3.4:8080');
    const withAuth = parseProxyAddress('1.2.3.4:8080:bob:se:cret');
    expect(withAuth).toMatchObject({ username: 'bob', password: 'se:cret' });
    expect(parseProxyAddress('[::1]:3128').url).toBe('http://[::1]:3128');
    expect(parseProxyAddress('[2001:db8::1]:3128:u:p').host).toBe('2001:db8::1');
  });

  test.each([
    ['', 'empty'],
    ['ftp://h:21', 'scheme'],
    ['http://h:80/path', 'no path'],
    ['1.2.3.4', 'host:port'],
    ['1.2.3.4:99999', 'out of range'],
    ['1.2.3.4:http', 'not a number'],
    ['1.2.3.4:80:user', 'password is missing'],
    ['bad host:80', 'is not a host'],
    ['[::1:80', 'ipv6'],
  ])('rejects %j with a ProxyAddressError', (input, fragment) => {
    let caught: unknown;
    try {
      parseProxyAddress(input);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ProxyAddressError);
    expect((caught as ProxyAddressError).code).toBe('MOCRA_ERR_PROXY_ADDRESS');
    expect((caught as Error).message).toContain(fragment);
  });

  test('never puts a password into an error message', () => {
    expect(() => parseProxyAddress('ftp://u:hunter2@h:21')).toThrow(/u:\*\*\*@/);
    expect(() => parseProxyAddress('1.2.3.4:x:u:hunter2')).not.toThrow(/hunter2/);
  });
});

describe('parseProxyList', () => {
  test('skips blanks and comments, counts and skips bad lines', () => {
    const list = parseProxyList(
      [
        '# exported 2026-01-01',
        '1.1.1.1:80',
        '',
        '  2.2.2.2:8080:u:p  ',
        'garbage',
        'socks5://3.3.3.3:1080\r',
      ].join('\n'),
    );
    expect(list.proxies.map((p) => p.url)).toEqual([
      'http://1.1.1.1:80',
      'http://u:p@2.2.2.2:8080',
      'socks5://3.3.3.3:1080',
    ]);
    expect(list.invalid).toBe(1);
    expect(list.problems[0]).toContain('garbage');
  });
});
