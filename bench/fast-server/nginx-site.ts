/**
 * A fast static server for the crawl benchmark: nginx (Debian's package) serving a generated link
 * graph from a temporary directory, one worker, keep-alive. The Node fixture site spends more CPU
 * per page than a crawler does, which hides the crawler's own per-page cost; nginx does not.
 *
 * The graph: page i links to pages i*fanout+1 … i*fanout+fanout (every page reachable from page 0)
 * and to `fanout` pseudo-random earlier pages (links that dedup must drop), padded with text to
 * the requested size. Pages are `/p/<i>.html`; nginx's access log counts the requests served.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

const NGINX = '/usr/sbin/nginx';

/** nginx's path, installing Debian's nginx-light when it is missing and we may; else a reason. */
export function ensureNginx(): { ok: true } | { ok: false; reason: string } {
  if (existsSync(NGINX)) return { ok: true };
  if (process.getuid?.() !== 0)
    return { ok: false, reason: 'nginx is not installed (apt-get install nginx-light, as root)' };
  const update = spawnSync('apt-get', ['update', '-qq'], { stdio: 'ignore' });
  const install = spawnSync('apt-get', ['install', '-y', '-qq', 'nginx-light'], {
    stdio: 'ignore',
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  });
  if (update.status !== 0 || install.status !== 0 || !existsSync(NGINX)) {
    return { ok: false, reason: 'nginx could not be installed with apt-get (no Debian mirror reachable?)' };
  }
  return { ok: true };
}

function page(i: number, pages: number, fanout: number, bytes: number): string {
  const links: string[] = [];
  for (let k = 1; k <= fanout; k++) {
    const child = i * fanout + k;
    if (child < pages) links.push(`<a href="/p/${child}.html">page ${child}</a>`);
  }
  // Deterministic back links: already-seen pages, which a crawler must recognise as duplicates.
  let x = (i * 2654435761) >>> 0;
  for (let k = 0; k < fanout && i > 0; k++) {
    x = (x * 1103515245 + 12345) >>> 0;
    links.push(`<a href="/p/${x % i}.html">back</a>`);
  }
  const head = `<!doctype html><html><head><meta charset="utf-8"><title>Page ${i}</title></head><body><h1>Page ${i}</h1>\n${links.join('\n')}\n<p>`;
  const tail = '</p></body></html>\n';
  const pad = Math.max(0, bytes - head.length - tail.length);
  return head + 'lorem ipsum '.repeat(Math.ceil(pad / 12)).slice(0, pad) + tail;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

export interface StaticSite {
  base: string;
  /** Requests nginx served since the last reset. */
  requests(): number;
  reset(): void;
  close(): void;
}

/** Generates the graph and starts nginx on it; `close()` stops nginx and removes the files. */
export async function startNginxSite(pages: number, fanout: number, bytes: number): Promise<StaticSite> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'mocra-bench-nginx-'));
  // mkdtemp makes the directory private; nginx's worker runs as another user and must read it.
  chmodSync(dir, 0o755);
  const docroot = path.join(dir, 'www');
  mkdirSync(path.join(docroot, 'p'), { recursive: true });
  for (let i = 0; i < pages; i++)
    writeFileSync(path.join(docroot, 'p', `${i}.html`), page(i, pages, fanout, bytes));
  writeFileSync(path.join(docroot, 'robots.txt'), 'User-agent: *\nAllow: /\n');
  const port = await freePort();
  const log = path.join(dir, 'access.log');
  writeFileSync(
    path.join(dir, 'nginx.conf'),
    `worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 1024; }
http {
  access_log ${log};
  keepalive_requests 1000000;
  keepalive_timeout 60s;
  sendfile on;
  tcp_nopush on;
  types { text/html html; text/plain txt; }
  client_body_temp_path ${dir}/tmp;
  proxy_temp_path ${dir}/tmp;
  fastcgi_temp_path ${dir}/tmp;
  uwsgi_temp_path ${dir}/tmp;
  scgi_temp_path ${dir}/tmp;
  server {
    listen 127.0.0.1:${port};
    root ${docroot};
  }
}
`,
  );
  mkdirSync(path.join(dir, 'tmp'));
  const child: ChildProcess = spawn(
    NGINX,
    ['-p', dir, '-c', path.join(dir, 'nginx.conf'), '-g', 'daemon off;'],
    {
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  let stderr = '';
  child.stderr?.on('data', (b: Buffer) => {
    stderr += b.toString();
  });
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`nginx exited: ${stderr.trim().slice(0, 500)}`);
    try {
      const res = await fetch(`${base}/robots.txt`);
      if (res.ok) break;
      child.kill('SIGTERM');
      throw new Error(`nginx answered ${res.status} for robots.txt (see ${dir}/error.log)`);
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill('SIGTERM');
      throw new Error(`nginx did not answer within 10 s (see ${dir}/error.log)`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  // Only page requests count: robots.txt and the readiness probe are not pages.
  const pagesServed = () =>
    existsSync(log)
      ? readFileSync(log, 'latin1')
          .split('\n')
          .filter((l) => l.includes('GET /p/')).length
      : 0;
  let offset = pagesServed();
  return {
    base,
    requests: () => pagesServed() - offset,
    reset: () => {
      offset = pagesServed();
    },
    close: () => {
      child.kill('SIGTERM');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
