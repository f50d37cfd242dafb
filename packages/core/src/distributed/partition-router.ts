/**
 * The routing layer of a Raft cluster without a queue service (a *partitioned* cluster): every
 * node runs on its own queues (in memory, or LevelDB with `persist`), and work that enters the
 * cluster goes to the one node that owns its key — rendezvous hashing over the live members:
 *
 * ```
 *   key                 what                                    where it arrives
 *   account:{account}   a module's task                         seeding, cron, /start_work
 *   host:{host:port}    a spider's entry request (its task      the node that ran the task
 *                       itself runs where it arrives)
 *
 *   arrives on A ── owner(key) = A ───────────────────────────▶ A's queue
 *                └─ owner(key) = B ── callApp(B, forward) ────▶ B's queue (engine.accept)
 *                                     refused / unreachable ──▶ A's queue (nothing is lost)
 * ```
 *
 * What a task produces after that — follow-ups, retries — stays on the node that runs it, so a
 * host (an account) is crawled by one node and that node's own dedup set is the crawl's. When a
 * member joins or dies only new work moves; what a dead node had queued is lost to the run,
 * unless the node restarts on its `persist` directory, which resumes it.
 */

import diagnostics from 'node:diagnostics_channel';
import type { PartitionOwnership } from '../coordination/partitions.js';
import type { EngineRouter, ForwardedWork } from '../engine/engine.js';
import { InvalidArgumentError } from '../errors.js';
import type { FollowUpTask, TaskEvent } from '../model/events.js';
import { Request, type RequestData } from '../model/request.js';

/** The cluster transport's topic of forwarded work. */
export const FORWARD_TOPIC = 'mocra.forward';

/** `mocra:cluster:forward` — work handed to its owner, taken from another node, or kept after a failed forward. */
export interface ForwardMessage {
  runId: string;
  /** `forwarded` and `failed` on the sender, `received` on the owner. */
  outcome: 'forwarded' | 'failed' | 'received';
  /** The sending node and the owner. */
  from: string;
  to: string;
  kind: ForwardedWork['kind'];
  /** Entry requests carried (0 for a task). */
  requests: number;
}

export const forwardChannel = diagnostics.channel('mocra:cluster:forward');

/** What one forward carries: the run it belongs to and the work. */
export interface ForwardBody {
  run: string;
  from: string;
  work: ForwardedWork;
}

/** The partition key of a module's task. */
export function accountPartitionKey(account: string | undefined): string {
  return `account:${account ?? 'default'}`;
}

/** The partition key of a spider's entry request: its URL's `host:port`. */
export function hostPartitionKey(url: string): string {
  return `host:${new URL(url).host}`;
}

export interface PartitionRouterOptions {
  ownership: PartitionOwnership;
  /** This member's id (as in the ownership's member list). */
  nodeId: string;
  runId: string;
  /** Hand `body` to member `to`; resolves once it is on that node's queue. */
  send(to: string, body: ForwardBody): Promise<void>;
  /** Modules partitioned by host (spiders); every other module by account. */
  byHost(module: string): boolean;
  /** A forward that failed (its work ran here instead). */
  onForwardFailed?(error: unknown, to: string): void;
}

/** Keys remembered for the partition map of `/nodes`. */
const KNOWN_KEYS = 256;

export class PartitionRouter implements EngineRouter {
  readonly #o: PartitionRouterOptions;
  /** Keys seen lately (routed or received), oldest first. */
  readonly #known = new Set<string>();
  /** Work handed to other nodes, and work taken from them. */
  readonly counts = { forwarded: 0, received: 0, failed: 0 };

  constructor(options: PartitionRouterOptions) {
    this.#o = options;
  }

  async routeTask(task: TaskEvent): Promise<boolean> {
    const names = task.modules ?? (task.module === undefined ? [] : [task.module]);
    // A spider's task only produces its entry requests, which routeSeeds spreads by host.
    if (names.length > 0 && names.every((m) => this.#o.byHost(m))) return false;
    await this.#readMembers();
    const key = accountPartitionKey(task.account);
    this.#remember(key);
    const owner = this.#o.ownership.ownerOf(key);
    if (owner === undefined || owner === this.#o.nodeId) return false;
    return this.#forward(owner, { kind: 'task', task });
  }

  async routeSeeds(requests: Request[], task: TaskEvent): Promise<Request[]> {
    const here: Request[] = [];
    // owner → (module, node) → requests: one forward per owner and target node.
    const away = new Map<string, Map<string, Request[]>>();
    if (requests.some((r) => r.module !== undefined && this.#o.byHost(r.module))) await this.#readMembers();
    for (const r of requests) {
      if (r.module === undefined || r.node === undefined || !this.#o.byHost(r.module)) {
        here.push(r);
        continue;
      }
      const key = hostPartitionKey(r.url);
      this.#remember(key);
      const owner = this.#o.ownership.ownerOf(key);
      if (owner === undefined || owner === this.#o.nodeId) {
        here.push(r);
        continue;
      }
      const byNode = away.get(owner) ?? new Map<string, Request[]>();
      away.set(owner, byNode);
      const target = `${r.module}\u0000${r.node}`;
      byNode.set(target, [...(byNode.get(target) ?? []), r]);
    }
    await Promise.all(
      [...away].flatMap(([owner, byNode]) =>
        [...byNode.values()].map(async (group) => {
          const first = group[0]!;
          const followUp: FollowUpTask = {
            module: first.module!,
            node: first.node!,
            runId: task.runId,
            ...(task.account === undefined ? {} : { account: task.account }),
            ...(task.platform === undefined ? {} : { platform: task.platform }),
            requests: group.map((r) => r.toJSON()),
            meta: {},
            depth: 0,
          };
          if (!(await this.#forward(owner, { kind: 'seeds', followUp }))) here.push(...group);
        }),
      ),
    );
    return here;
  }

  /** Check a forward that arrived (untrusted: it came over the network) and note its keys. */
  received(body: unknown): ForwardedWork {
    const work = parseForwardBody(body, this.#o.runId);
    this.counts.received++;
    const from = (body as { from?: unknown }).from;
    this.#publish('received', typeof from === 'string' ? from : '?', this.#o.nodeId, work);
    if (work.kind === 'task') this.#remember(accountPartitionKey(work.task.account));
    else for (const r of work.followUp.requests) this.#remember(hostPartitionKey(r.url));
    return work;
  }

  /** The keys seen lately, by their owner among the live members now. */
  partitionMap(): Map<string, string[]> {
    const map = new Map<string, string[]>();
    for (const member of this.#o.ownership.members()) map.set(member, []);
    for (const key of [...this.#known].sort()) {
      const owner = this.#o.ownership.ownerOf(key);
      if (owner !== undefined) map.get(owner)?.push(key);
    }
    return map;
  }

  /**
   * Read the members again before routing. The periodic read can be a beat behind a join, and
   * a host routed on the old list is crawled by the wrong node for the whole crawl (its
   * follow-ups stay where it runs). Routing is once per task, so the read costs little; a
   * failed read keeps the last list.
   */
  async #readMembers(): Promise<void> {
    await this.#o.ownership.refresh().catch(() => undefined);
  }

  async #forward(owner: string, work: ForwardedWork): Promise<boolean> {
    try {
      await this.#o.send(owner, { run: this.#o.runId, from: this.#o.nodeId, work });
      this.counts.forwarded++;
      this.#publish('forwarded', this.#o.nodeId, owner, work);
      return true;
    } catch (err) {
      this.#publish('failed', this.#o.nodeId, owner, work);
      // The owner died (its membership has not lapsed yet) or is not running yet: run it here,
      // and read the members again so that the next work goes where it now belongs.
      this.counts.failed++;
      this.#o.onForwardFailed?.(err, owner);
      this.#o.ownership.refresh().catch(() => undefined);
      return false;
    }
  }

  #publish(outcome: ForwardMessage['outcome'], from: string, to: string, work: ForwardedWork): void {
    if (!forwardChannel.hasSubscribers) return;
    const requests = work.kind === 'seeds' ? work.followUp.requests.length : 0;
    forwardChannel.publish({
      runId: this.#o.runId,
      outcome,
      from,
      to,
      kind: work.kind,
      requests,
    } satisfies ForwardMessage);
  }

  #remember(key: string): void {
    this.#known.delete(key);
    this.#known.add(key);
    if (this.#known.size > KNOWN_KEYS) this.#known.delete(this.#known.values().next().value!);
  }
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const optionalString = (v: unknown): v is string | undefined => v === undefined || typeof v === 'string';

/** The work in a forward's body, checked field by field; `InvalidArgumentError` otherwise. */
export function parseForwardBody(body: unknown, runId: string): ForwardedWork {
  const bad = (what: string): never => {
    throw new InvalidArgumentError(`forwarded work refused: ${what}`);
  };
  if (!isRecord(body) || !isRecord(body.work)) return bad('not a forward');
  if (body.run !== runId) return bad(`it belongs to run '${String(body.run)}', this node runs '${runId}'`);
  const work = body.work;
  if (work.kind === 'task') {
    const t = work.task;
    if (!isRecord(t) || typeof t.runId !== 'string') return bad('a task needs a runId');
    if (!optionalString(t.module) || !optionalString(t.account) || !optionalString(t.platform))
      return bad('task module, account and platform must be strings');
    if (
      t.modules !== undefined &&
      !(Array.isArray(t.modules) && t.modules.every((m) => typeof m === 'string'))
    )
      return bad('task modules must be a list of names');
    if (t.params !== undefined && !isRecord(t.params)) return bad('task params must be an object');
    if (t.priority !== undefined && typeof t.priority !== 'number')
      return bad('task priority must be a number');
    return { kind: 'task', task: t as unknown as TaskEvent };
  }
  if (work.kind === 'seeds') {
    const f = work.followUp;
    if (
      !isRecord(f) ||
      typeof f.module !== 'string' ||
      typeof f.node !== 'string' ||
      typeof f.runId !== 'string'
    )
      return bad('seeds need module, node and runId');
    if (!optionalString(f.account) || !optionalString(f.platform))
      return bad('seeds account and platform must be strings');
    if (!Array.isArray(f.requests) || f.requests.length === 0) return bad('seeds need requests');
    const requests = f.requests.map((r) => {
      if (!isRecord(r) || typeof r.url !== 'string') return bad('a request needs a url');
      return Request.from(r as unknown as RequestData).toJSON();
    });
    return {
      kind: 'seeds',
      followUp: {
        module: f.module,
        node: f.node,
        runId: f.runId,
        ...(f.account === undefined ? {} : { account: f.account }),
        ...(f.platform === undefined ? {} : { platform: f.platform }),
        requests,
        meta: {},
        depth: 0,
      },
    };
  }
  return bad(`unknown kind ${String(work.kind)}`);
}
