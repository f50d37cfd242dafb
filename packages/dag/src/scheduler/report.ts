import type { NodeState, OutputSource } from '../events/types.js';
import type { Payload } from '../payload/payload.js';
import type { DagReport, NodeResult } from './types.js';

export const STATE_NAMES: readonly NodeState[] = [
  'pending',
  'ready',
  'running',
  'waiting',
  'backoff',
  'succeeded',
  'failed',
  'cancelled',
];
export const SOURCE_NAMES: readonly (OutputSource | undefined)[] = [
  undefined,
  'run',
  'cache',
  'singleflight',
  'checkpoint',
];

export interface ReportData {
  readonly runId: string;
  readonly fencingToken: number | undefined;
  readonly durationMs: number;
  readonly ids: readonly string[];
  readonly index: ReadonlyMap<string, number>;
  readonly layers: readonly (readonly string[])[];
  readonly layerOf: Int32Array;
  readonly states: Uint8Array;
  readonly sources: Uint8Array;
  readonly attempts: Int32Array;
  readonly outputs: readonly (Payload | undefined)[];
  readonly errors: ReadonlyMap<number, unknown>;
}

/**
 * A run's report. The maps and the result list are built on first access: a run of 100,000
 * nodes should not pay for three maps its caller may never read.
 */
export class RunReport implements DagReport {
  readonly runId: string;
  readonly fencingToken: number | undefined;
  readonly durationMs: number;
  readonly layers: readonly (readonly string[])[];
  readonly #d: ReportData;
  #outputs: Map<string, Payload> | undefined;
  #states: Map<string, NodeState> | undefined;
  #results: NodeResult[] | undefined;

  constructor(data: ReportData) {
    this.#d = data;
    this.runId = data.runId;
    this.fencingToken = data.fencingToken;
    this.durationMs = data.durationMs;
    this.layers = data.layers;
  }

  get outputs(): ReadonlyMap<string, Payload> {
    if (this.#outputs === undefined) {
      const map = new Map<string, Payload>();
      const { ids, outputs, states } = this.#d;
      for (let i = 0; i < ids.length; i++) {
        if (STATE_NAMES[states[i] as number] === 'succeeded')
          map.set(ids[i] as string, outputs[i] as Payload);
      }
      this.#outputs = map;
    }
    return this.#outputs;
  }

  get states(): ReadonlyMap<string, NodeState> {
    if (this.#states === undefined) {
      const map = new Map<string, NodeState>();
      const { ids, states } = this.#d;
      for (let i = 0; i < ids.length; i++)
        map.set(ids[i] as string, STATE_NAMES[states[i] as number] as NodeState);
      this.#states = map;
    }
    return this.#states;
  }

  get results(): readonly NodeResult[] {
    if (this.#results === undefined) {
      const d = this.#d;
      this.#results = d.ids.map((nodeId, i) => {
        const state = STATE_NAMES[d.states[i] as number] as NodeState;
        const source = SOURCE_NAMES[d.sources[i] as number];
        const error = d.errors.get(i);
        return {
          nodeId,
          layer: d.layerOf[i] as number,
          state,
          attempts: d.attempts[i] as number,
          ...(source === undefined ? {} : { source }),
          ...(state === 'succeeded' ? { output: d.outputs[i] as Payload } : {}),
          ...(error === undefined ? {} : { error }),
        };
      });
    }
    return this.#results;
  }

  output(id: string): Payload | undefined {
    const i = this.#d.index.get(id);
    if (i === undefined || STATE_NAMES[this.#d.states[i] as number] !== 'succeeded') return undefined;
    return this.#d.outputs[i];
  }

  /** A JSON-safe summary (outputs are left out: they are bytes). */
  toJSON(): object {
    return {
      runId: this.runId,
      fencingToken: this.fencingToken,
      durationMs: this.durationMs,
      layers: this.layers,
      states: Object.fromEntries(this.states),
    };
  }
}
