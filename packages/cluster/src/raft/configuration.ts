import type { ConfigChange, NodeId, RaftConfiguration, RaftMember } from './types.js';

/** Smallest number of voters that forms a majority of `voterCount`. */
export function quorumSize(voterCount: number): number {
  return Math.floor(voterCount / 2) + 1;
}

export function voterIds(config: RaftConfiguration): NodeId[] {
  return config.members.filter((m) => m.voter).map((m) => m.id);
}

export function findMember(config: RaftConfiguration, id: NodeId): RaftMember | undefined {
  return config.members.find((m) => m.id === id);
}

export function isVoter(config: RaftConfiguration, id: NodeId): boolean {
  return findMember(config, id)?.voter === true;
}

/**
 * The value of the `quorum`-th largest of `values` (the index a majority has reached).
 * Returns 0 when there are fewer values than the quorum.
 */
export function quorumValue(values: readonly number[], quorum: number): number {
  if (values.length < quorum || quorum <= 0) return 0;
  const sorted = [...values].sort((a, b) => b - a);
  return sorted[quorum - 1] ?? 0;
}

/** Why a change cannot be applied, or the new configuration. */
export type ConfigChangeResult =
  | { readonly ok: true; readonly config: RaftConfiguration }
  | { readonly ok: false; readonly reason: 'unknown-node' | 'retired' | 'last-voter' | 'no-op' };

/**
 * Apply one single-server change. Members stay sorted by id so two nodes that apply the same
 * change produce byte-identical configurations.
 */
export function applyConfigChange(config: RaftConfiguration, change: ConfigChange): ConfigChangeResult {
  const existing = findMember(config, change.id);
  switch (change.op) {
    case 'add-learner': {
      if (config.retired.includes(change.id)) return { ok: false, reason: 'retired' };
      if (existing && existing.addr === change.addr) return { ok: false, reason: 'no-op' };
      // A known member that comes back on a new address keeps its role; only the address moves.
      const member: RaftMember = { id: change.id, addr: change.addr, voter: existing?.voter ?? false };
      return {
        ok: true,
        config: withMembers(config, [...config.members.filter((m) => m.id !== change.id), member]),
      };
    }
    case 'promote': {
      if (!existing) return { ok: false, reason: 'unknown-node' };
      if (existing.voter) return { ok: false, reason: 'no-op' };
      const members = config.members.map((m) => (m.id === change.id ? { ...m, voter: true } : m));
      return { ok: true, config: withMembers(config, members) };
    }
    case 'remove': {
      if (!existing) return { ok: false, reason: 'unknown-node' };
      if (existing.voter && voterIds(config).length === 1) return { ok: false, reason: 'last-voter' };
      const members = config.members.filter((m) => m.id !== change.id);
      return {
        ok: true,
        config: { members: sortMembers(members), retired: [...config.retired, change.id].sort() },
      };
    }
  }
}

function withMembers(config: RaftConfiguration, members: RaftMember[]): RaftConfiguration {
  return { members: sortMembers(members), retired: config.retired };
}

function sortMembers(members: RaftMember[]): RaftMember[] {
  return members.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

export function encodeConfiguration(config: RaftConfiguration): string {
  return JSON.stringify({
    members: config.members.map((m) => ({ id: m.id, addr: m.addr, voter: m.voter })),
    retired: [...config.retired],
  });
}

/** Parses a configuration written by {@link encodeConfiguration}; throws on anything else. */
export function decodeConfiguration(data: string): RaftConfiguration {
  const raw: unknown = JSON.parse(data);
  if (!isRecord(raw) || !Array.isArray(raw.members) || !Array.isArray(raw.retired)) {
    throw new TypeError('not a cluster configuration');
  }
  const members: RaftMember[] = raw.members.map((m: unknown) => {
    if (
      !isRecord(m) ||
      typeof m.id !== 'string' ||
      typeof m.addr !== 'string' ||
      typeof m.voter !== 'boolean'
    ) {
      throw new TypeError('bad member in cluster configuration');
    }
    return { id: m.id, addr: m.addr, voter: m.voter };
  });
  const retired = raw.retired.map((r: unknown) => {
    if (typeof r !== 'string') throw new TypeError('bad retired id in cluster configuration');
    return r;
  });
  return { members, retired };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null;
}
