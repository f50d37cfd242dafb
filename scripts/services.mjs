#!/usr/bin/env node
// Makes sure the local services the tests talk to are up, starting any that is down with the
// machine's own start command. Prints one line per service; exits 0 even when a service
// cannot be started, because the tests that need it fail with their own clear message.
import { execSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

const pgVersion = (() => {
  try {
    return fs.readdirSync('/etc/postgresql')[0];
  } catch {
    return undefined;
  }
})();

const SERVICES = [
  {
    name: 'redis',
    port: 6379,
    start:
      'redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log',
  },
  {
    name: 'nats',
    port: 4222,
    start:
      'start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log',
  },
  {
    name: 'postgres',
    port: 5432,
    start: pgVersion ? `pg_ctlcluster --skip-systemctl-redirect ${pgVersion} main start` : undefined,
  },
];

function probe(port, timeoutMs = 500) {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    const done = (ok) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

export async function ensureServices({ quiet = false } = {}) {
  for (const svc of SERVICES) {
    if (await probe(svc.port)) {
      if (!quiet) console.log(`services: ${svc.name} up on 127.0.0.1:${svc.port}`);
      continue;
    }
    if (!svc.start) {
      console.log(`services: ${svc.name} is down and this machine has no start command for it`);
      continue;
    }
    console.log(`services: ${svc.name} is down; starting it`);
    try {
      execSync(svc.start, { stdio: 'inherit' });
    } catch (err) {
      console.log(`services: could not start ${svc.name}: ${err.message}`);
      continue;
    }
    let up = false;
    for (let i = 0; i < 40 && !up; i++) {
      up = await probe(svc.port);
      if (!up) await sleep(250);
    }
    console.log(`services: ${svc.name} ${up ? 'started' : 'still down after 10 s'}`);
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await ensureServices();
