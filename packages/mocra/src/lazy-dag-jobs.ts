/**
 * The builder's DAG jobs, with `@mocra/core/cluster` (their dispatcher, worker and fenced
 * stores) imported on the first `.dag()`, not with `import 'mocra'`: most programs define no
 * DAG job and should not load that code.
 *
 * `.dag()` is synchronous, so each job is registered at once as a stand-in module whose one
 * node waits for the real one; the jobs attach to the engine as soon as the code has loaded
 * (`run()` and `buildDistributed()` await it first; `build()` lets it finish on its own, which
 * the stand-in's node also waits for).
 */
import { type Coordination, type Engine, InvalidArgumentError, type Module } from '@mocra/core';
import type { DagJobOptions, DagJobResult, DagJobs } from '@mocra/core/cluster';
import type { Dag } from '@mocra/dag';

export class LazyDagJobs {
  readonly #loading: Promise<DagJobs>;
  readonly #modules = new Map<string, Promise<Module<DagJobResult>>>();
  #attached: Promise<void> | undefined;

  constructor() {
    this.#loading = import('@mocra/core/cluster').then((cluster) => cluster.createDagJobs());
    // A failed import surfaces where the jobs are used (attach, a job's node), not here.
    this.#loading.catch(() => {});
  }

  /** The module to register for a job (its graph is built now, as `.dag()` always did). */
  module(name: string, build: () => Dag, options: DagJobOptions): Module<DagJobResult> {
    // The checks DagJobs makes, here too, so that a bad name still fails at `.dag()`.
    if (typeof name !== 'string' || name === '') throw new InvalidArgumentError('a DAG job needs a name');
    if (this.#modules.has(name))
      throw new InvalidArgumentError(`a DAG job named '${name}' is already defined`);
    const dag = build();
    const real = this.#loading.then((jobs) => jobs.module(name, () => dag, options));
    real.catch(() => {});
    this.#modules.set(name, real);
    return {
      name,
      ...(options.cron === undefined ? {} : { cron: options.cron }),
      nodes: [
        {
          id: 'run',
          generate: async (ctx) => {
            const module = await real;
            await this.#attached;
            return module.nodes![0]!.generate!(ctx);
          },
          // The node makes no requests, so there is never a response to parse.
          parse() {},
        },
      ],
    };
  }

  /** Start this node's dispatcher (and worker) on the engine, once the jobs have loaded. */
  attach(options: { engine: Engine; coordination?: Coordination }): Promise<void> {
    this.#attached = (async () => {
      const jobs = await this.#loading;
      // Every job's module is defined before the jobs attach (attach reads their graphs).
      await Promise.all(this.#modules.values());
      jobs.attach(options);
    })();
    return this.#attached;
  }

  async close(): Promise<void> {
    const jobs = await this.#loading.catch(() => undefined);
    await this.#attached?.catch(() => {});
    await jobs?.close();
  }
}
