import { request } from 'undici';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { HOSTILE_CREDENTIALS, type HostileSite, startHostileSite } from './hostile-site.js';

let site: HostileSite;
beforeAll(async () => {
  site = await startHostileSite();
});
afterAll(() => site.close());

test('stacked codings: n gzip layers, each named in Content-Encoding', async () => {
  const res = await request(`${site.url}/stacked-encoding/7`);
  expect(String(res.headers['content-encoding']).split(', ')).toHaveLength(7);
  let body = Buffer.from(await res.body.arrayBuffer());
  const { gunzipSync } = await import('node:zlib');
  for (let i = 0; i < 7; i++) body = gunzipSync(body);
  expect(body.toString()).toContain('gzip × 7');
});

test('an empty Location, a huge title, links with credentials, a redirect to the other name', async () => {
  const empty = await request(`${site.url}/empty-location`);
  expect(empty.statusCode).toBe(302);
  expect(empty.headers.location).toBe('');
  await empty.body.dump();

  const title = await (await request(`${site.url}/huge-title/100000`)).body.text();
  expect(title).toContain(`<title>${'t'.repeat(100_000)}</title>`);

  const creds = await (await request(`${site.url}/credentials`)).body.text();
  expect(creds).toContain(`${HOSTILE_CREDENTIALS.username}:${HOSTILE_CREDENTIALS.password}@`);

  const away = await request(`${site.url}/redirect-away`);
  expect(away.headers.location).toBe(`${site.otherNameUrl}/linked/5`);
  await away.body.dump();
  expect(site.stats()['/redirect-away']).toBe(1);
});

test('a CONNECT is refused with 502', async () => {
  const net = await import('node:net');
  const socket = net.connect(site.port, '127.0.0.1');
  socket.write('CONNECT example.invalid:443 HTTP/1.1\r\nHost: example.invalid:443\r\n\r\n');
  const answer = await new Promise<string>((resolve) => {
    let text = '';
    socket.on('data', (b) => {
      text += b.toString();
    });
    socket.on('close', () => resolve(text));
  });
  expect(answer).toMatch(/^HTTP\/1\.1 502/);
  expect(site.stats()['CONNECT example.invalid:443']).toBe(1);
});
