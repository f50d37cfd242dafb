import { UnknownNodeError } from '../errors.js';
import type { NodeContext } from '../graph/node.js';
import type { Payload } from '../payload/payload.js';

/** What an attempt context reads from the run it belongs to. */
export interface ContextSource {
  readonly runId: string;
  readonly fencingToken: number | undefined;
  readonly ids: readonly string[];
  readonly predecessors: readonly (readonly number[])[];
  readonly layerOf: Int32Array;
  readonly outputs: readonly (Payload | undefined)[];
  readonly keys: readonly (string | undefined)[];
}

/**
 * One attempt's context. Cheap to create: the AbortController and the upstream map are made
 * only when the node asks for them, because most nodes of a big graph never do. Aborting before
 * the signal exists just records the reason; the signal is born aborted if asked for later.
 */
export class AttemptContext implements NodeContext {
  readonly runId: string;
  readonly fencingToken: number | undefined;
  readonly attempt: number;
  readonly deadline: number | undefined;
  /** Epoch ms the attempt started; only recorded when someone observes events. */
  startedAt = 0;
  readonly #src: ContextSource;
  readonly #index: number;
  #controller: AbortController | undefined = undefined;
  #aborted = false;
  #reason: unknown = undefined;
  #upstream: Map<string, Payload> | undefined = undefined;

  constructor(src: ContextSource, index: number, attempt: number, deadline: number | undefined) {
    this.runId = src.runId;
    this.fencingToken = src.fencingToken;
    this.attempt = attempt;
    this.deadline = deadline;
    this.#src = src;
    this.#index = index;
  }

  get nodeId(): string {
    return this.#src.ids[this.#index] as string;
  }

  get layer(): number {
    return this.#src.layerOf[this.#index] as number;
  }

  get idempotencyKey(): string | undefined {
    return this.#src.keys[this.#index];
  }

  get predecessors(): readonly string[] {
    const ids = this.#src.ids;
    return (this.#src.predecessors[this.#index] as readonly number[]).map((p) => ids[p] as string);
  }

  get upstream(): ReadonlyMap<string, Payload> {
    if (this.#upstream === undefined) {
      const map = new Map<string, Payload>();
      const { ids, outputs } = this.#src;
      // Predecessors succeeded before this attempt started, so their outputs are set and final.
      for (const p of this.#src.predecessors[this.#index] as readonly number[]) {
        map.set(ids[p] as string, outputs[p] as Payload);
      }
      this.#upstream = map;
    }
    return this.#upstream;
  }

  input(id: string): Payload {
    const out = this.upstream.get(id);
    if (out === undefined) throw new UnknownNodeError(id, `is not a direct predecessor of '${this.nodeId}'`);
    return out;
  }

  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.#aborted) this.#controller.abort(this.#reason);
    }
    return this.#controller.signal;
  }

  get aborted(): boolean {
    return this.#aborted;
  }

  abort(reason: unknown): void {
    if (this.#aborted) return;
    this.#aborted = true;
    this.#reason = reason;
    this.#controller?.abort(reason);
  }
}
