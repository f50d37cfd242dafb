/**
 * Host and process resource figures for `/observability/system` and `mocra_resource_usage`.
 *
 * CPU use is a rate, so it needs two readings: each sample is compared with the previous one
 * (the first with the counters since boot / process start). Samples are cached for
 * `minIntervalMs` so that several dashboards polling at once neither cost a /proc read each
 * nor shrink the measuring window into noise.
 */
import { readFileSync } from 'node:fs';
import os from 'node:os';

export interface ProcessSnapshot {
  pid: number;
  /** Share of one core this process used since the previous sample (can exceed 100 with worker threads). */
  cpuUsagePercent: number;
  rssBytes: number;
  heapUsedBytes: number;
  heapTotalBytes: number;
  externalBytes: number;
  uptimeSeconds: number;
}

export interface SystemSnapshot {
  hostname: string;
  platform: string;
  nodeVersion: string;
  cpuCount: number;
  /** Whole-host CPU use since the previous sample, 0–100. */
  cpuUsagePercent: number;
  loadAverage: [number, number, number];
  memoryUsedBytes: number;
  memoryTotalBytes: number;
  memoryUsagePercent: number;
  swapUsedBytes: number;
  swapTotalBytes: number;
  process: ProcessSnapshot;
  /** Epoch ms of the sample. */
  updatedAt: number;
}

export interface SystemSamplerOptions {
  /** A sample younger than this is returned again instead of measuring anew. @default 1000 */
  minIntervalMs?: number;
}

interface CpuReading {
  idle: number;
  total: number;
}

export class SystemSampler {
  readonly #minIntervalMs: number;
  #last: SystemSnapshot | undefined;
  #cpu: CpuReading = { idle: 0, total: 0 };
  #processCpu = { micros: 0, at: performance.now() - process.uptime() * 1000 };

  constructor(options: SystemSamplerOptions = {}) {
    this.#minIntervalMs = options.minIntervalMs ?? 1000;
  }

  sample(now = Date.now()): SystemSnapshot {
    if (this.#last !== undefined && now - this.#last.updatedAt < this.#minIntervalMs) return this.#last;

    const cpu = readCpu();
    const dTotal = cpu.total - this.#cpu.total;
    const dIdle = cpu.idle - this.#cpu.idle;
    const cpuUsagePercent = dTotal > 0 ? clampPercent((1 - dIdle / dTotal) * 100) : 0;
    this.#cpu = cpu;

    const usage = process.cpuUsage();
    const micros = usage.user + usage.system;
    const at = performance.now();
    const wallMicros = (at - this.#processCpu.at) * 1000;
    const processCpuPercent = wallMicros > 0 ? ((micros - this.#processCpu.micros) / wallMicros) * 100 : 0;
    this.#processCpu = { micros, at };

    const memory = readMemory();
    const mem = process.memoryUsage();
    const [l1 = 0, l5 = 0, l15 = 0] = os.loadavg();
    const snapshot: SystemSnapshot = {
      hostname: os.hostname(),
      platform: `${process.platform}-${process.arch}`,
      nodeVersion: process.version,
      cpuCount: os.availableParallelism(),
      cpuUsagePercent: round(cpuUsagePercent),
      loadAverage: [round(l1), round(l5), round(l15)],
      memoryUsedBytes: memory.used,
      memoryTotalBytes: memory.total,
      memoryUsagePercent: memory.total > 0 ? round((memory.used / memory.total) * 100) : 0,
      swapUsedBytes: memory.swapUsed,
      swapTotalBytes: memory.swapTotal,
      process: {
        pid: process.pid,
        cpuUsagePercent: round(Math.max(0, processCpuPercent)),
        rssBytes: mem.rss,
        heapUsedBytes: mem.heapUsed,
        heapTotalBytes: mem.heapTotal,
        externalBytes: mem.external,
        uptimeSeconds: round(process.uptime()),
      },
      updatedAt: now,
    };
    this.#last = snapshot;
    return snapshot;
  }
}

function readCpu(): CpuReading {
  let idle = 0;
  let total = 0;
  for (const cpu of os.cpus()) {
    const t = cpu.times;
    idle += t.idle;
    total += t.user + t.nice + t.sys + t.idle + t.irq;
  }
  return { idle, total };
}

interface MemoryReading {
  used: number;
  total: number;
  swapUsed: number;
  swapTotal: number;
}

/**
 * Linux: /proc/meminfo, where "used" is total minus MemAvailable (page cache the kernel gives
 * back on demand is not "used"). Elsewhere: os.totalmem/freemem and no swap figures.
 */
function readMemory(): MemoryReading {
  const total = os.totalmem();
  let text: string | undefined;
  try {
    text = process.platform === 'linux' ? readFileSync('/proc/meminfo', 'utf8') : undefined;
  } catch {
    text = undefined;
  }
  if (text === undefined) return { used: total - os.freemem(), total, swapUsed: 0, swapTotal: 0 };
  const kib = (field: string): number | undefined => {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text);
    return match?.[1] === undefined ? undefined : Number(match[1]) * 1024;
  };
  const memTotal = kib('MemTotal') ?? total;
  const available = kib('MemAvailable') ?? os.freemem();
  const swapTotal = kib('SwapTotal') ?? 0;
  const swapFree = kib('SwapFree') ?? swapTotal;
  return {
    used: Math.max(0, memTotal - available),
    total: memTotal,
    swapUsed: swapTotal - swapFree,
    swapTotal,
  };
}

function clampPercent(value: number): number {
  return Math.min(100, Math.max(0, value));
}

function round(value: number): number {
  return Math.round(value * 100) / 100;
}
