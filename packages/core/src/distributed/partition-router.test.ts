import diagnostics from 'node:diagnostics_channel';
import { afterEach, expect, test } from 'vitest';
import { createLocalCoordination, LocalCoordinationStore } from '../coordination/local-coordination.js';
import { createPartitionOwnership, rendezvousOwner } from '../coordination/partitions.js';
import type { Coordination } from '../coordination/types.js';
import { Request } from '../model/request.js';
import {
  accountPartitionKey,
  type ForwardBody,
  type ForwardMessage,
  hostPartitionKey,
  PartitionRouter,
  parseForwardBody,
} from './partition-router.js';

const MEMBERS = ['a', 'b', 'c'];
const opened: Coordination[] = [];

afterEach(async () => {
  for (const c of opened.splice(0)) await c.close();
});

/** Three members of one local coordination; the router runs on `a`. */
async function routerOn(send: (to: string, body: ForwardBody) => Promise<void>) {
  const store = new LocalCoordinationStore();
  for (const id of MEMBERS) {
    const c = createLocalCoordination({ nodeId: id, store });
    opened.push(c);
    await c.join();
  }
  const ownership = createPartitionOwnership(opened[0]!);
  await ownership.refresh();
  return new PartitionRouter({
    ownership,
    nodeId: 'a',
    runId: 'r1',
    send,
    byHost: (module) => module === 'spider',
  });
}

/** A host whose owner among the members is `owner`. */
function hostOwnedBy(owner: string): string {
  for (let i = 0; i < 1_000; i++) {
    const url = `http://h${i}.test:80${i % 10}`;
    if (rendezvousOwner(hostPartitionKey(url), MEMBERS) === owner) return url;
  }
  throw new Error(`no host for ${owner}`);
}

function accountOwnedBy(owner: string): string {
  for (let i = 0; i < 1_000; i++)
    if (rendezvousOwner(accountPartitionKey(`acc${i}`), MEMBERS) === owner) return `acc${i}`;
  throw new Error(`no account for ${owner}`);
}

const claimed = (url: string) =>
  Object.assign(new Request(url), { module: 'spider', node: 'spider', runId: 'r1' });

test("a module's task goes to its account's owner; a spider's task stays; its entry requests go by host", async () => {
  const sent: [string, ForwardBody][] = [];
  const router = await routerOn(async (to, body) => {
    sent.push([to, body]);
  });
  expect(await router.routeTask({ module: 'mod', runId: 'r1', account: accountOwnedBy('a') })).toBe(false);
  expect(await router.routeTask({ module: 'mod', runId: 'r1', account: accountOwnedBy('b') })).toBe(true);
  expect(await router.routeTask({ module: 'spider', runId: 'r1', account: accountOwnedBy('b') })).toBe(false);
  expect(sent.map(([to, body]) => [to, body.work.kind])).toEqual([['b', 'task']]);

  const [onA, onB, onC] = [hostOwnedBy('a'), hostOwnedBy('b'), hostOwnedBy('c')];
  const here = await router.routeSeeds(
    [claimed(`${onA}/1`), claimed(`${onB}/1`), claimed(`${onB}/2`), claimed(`${onC}/1`)],
    { module: 'spider', runId: 'r1' },
  );
  expect(here.map((r) => r.url)).toEqual([`${onA}/1`]);
  const seeds = sent.slice(1).map(([to, body]) => {
    if (body.work.kind !== 'seeds') throw new Error('expected seeds');
    return [to, body.work.followUp.requests.map((r) => r.url)];
  });
  expect(seeds.sort()).toEqual([
    ['b', [`${onB}/1`, `${onB}/2`]],
    ['c', [`${onC}/1`]],
  ]);
  // The map of /nodes: every key seen, under its owner.
  const map = router.partitionMap();
  expect(map.get('b')).toContain(hostPartitionKey(onB));
  expect(map.get('c')).toEqual([hostPartitionKey(onC)]);
  expect(router.counts).toMatchObject({ forwarded: 3, failed: 0 });
});

test('members who joined since the last periodic read get their hosts: the router reads the members before it routes', async () => {
  const store = new LocalCoordinationStore();
  const a = createLocalCoordination({ nodeId: 'a', store });
  opened.push(a);
  await a.join();
  const ownership = createPartitionOwnership(a, { refreshMs: 60_000 });
  await ownership.refresh();
  expect(ownership.members()).toEqual(['a']);
  const sent: [string, ForwardBody][] = [];
  const router = new PartitionRouter({
    ownership,
    nodeId: 'a',
    runId: 'r1',
    send: async (to, body) => {
      sent.push([to, body]);
    },
    byHost: (module) => module === 'spider',
  });
  for (const id of ['b', 'c']) {
    const c = createLocalCoordination({ nodeId: id, store });
    opened.push(c);
    await c.join();
  }
  const [onA, onB, onC] = [hostOwnedBy('a'), hostOwnedBy('b'), hostOwnedBy('c')];
  const here = await router.routeSeeds([claimed(`${onA}/1`), claimed(`${onB}/1`), claimed(`${onC}/1`)], {
    module: 'spider',
    runId: 'r1',
  });
  expect(here.map((r) => r.url)).toEqual([`${onA}/1`]);
  expect(sent.map(([to]) => to).sort()).toEqual(['b', 'c']);
  expect(await router.routeTask({ module: 'mod', runId: 'r1', account: accountOwnedBy('c') })).toBe(true);
  expect(sent.at(-1)![0]).toBe('c');
});

test('a forward that fails keeps its work on this node, and says so on mocra:cluster:forward', async () => {
  const messages: ForwardMessage[] = [];
  const listen = (m: unknown) => messages.push(m as ForwardMessage);
  diagnostics.subscribe('mocra:cluster:forward', listen);
  try {
    const router = await routerOn(async () => {
      throw new Error('connection refused');
    });
    const onB = hostOwnedBy('b');
    const here = await router.routeSeeds([claimed(`${onB}/1`)], { module: 'spider', runId: 'r1' });
    expect(here.map((r) => r.url)).toEqual([`${onB}/1`]);
    expect(await router.routeTask({ module: 'mod', runId: 'r1', account: accountOwnedBy('c') })).toBe(false);
    expect(router.counts).toMatchObject({ forwarded: 0, failed: 2 });
    expect(messages).toEqual([
      { runId: 'r1', outcome: 'failed', from: 'a', to: 'b', kind: 'seeds', requests: 1 },
      { runId: 'r1', outcome: 'failed', from: 'a', to: 'c', kind: 'task', requests: 0 },
    ]);
  } finally {
    diagnostics.unsubscribe('mocra:cluster:forward', listen);
  }
});

test('a forward of another run, or a malformed one, is refused with MOCRA_ERR_INVALID_ARGUMENT', () => {
  const task = { kind: 'task', task: { module: 'mod', runId: 'r1' } };
  expect(parseForwardBody({ run: 'r1', from: 'b', work: task }, 'r1')).toEqual(task);
  for (const body of [
    { run: 'r2', from: 'b', work: task },
    { run: 'r1', work: { kind: 'task', task: { module: 3, runId: 'r1' } } },
    { run: 'r1', work: { kind: 'seeds', followUp: { module: 'm', node: 'n', runId: 'r1', requests: [] } } },
    { run: 'r1', work: { kind: 'seeds', followUp: { module: 'm', node: 'n', runId: 'r1', requests: [{}] } } },
    { run: 'r1', work: { kind: 'explode' } },
    'nonsense',
  ]) {
    expect(() => parseForwardBody(body, 'r1'), JSON.stringify(body)).toThrow(
      expect.objectContaining({ code: 'MOCRA_ERR_INVALID_ARGUMENT' }),
    );
  }
});
