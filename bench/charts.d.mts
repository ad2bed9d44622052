// Types of bench/charts.mjs, for test/bench/charts.test.ts (the benchmark scripts are plain ESM).

/** One body size of one implementation in bench/micro.mjs's JSON: ns per call over rounds. */
export interface MicroPoint {
  size: number;
  medianNs: number;
  minNs?: number;
  maxNs?: number;
  samplesNs?: number[];
}

/** bench/micro.mjs's JSON (BENCH_JSON_FILE), as much of it as the chart reads. */
export interface MicroResults {
  part?: "micro";
  date: string;
  machine: string;
  quick?: boolean;
  rounds?: number;
  cases: { id: string; label?: string; name?: string; kind?: string; results: MicroPoint[] }[];
}

/** A median with the min–max across rounds. */
export interface Spread {
  median: number;
  min?: number;
  max?: number;
}

/** bench/http.mjs's JSON (BENCH_JSON_FILE), as much of it as the chart reads. */
export interface HttpResults {
  part?: "http";
  date: string;
  machine: string;
  quick?: boolean;
  bodySize?: number;
  connections?: number;
  rounds?: number;
  durationS?: number;
  cases: { id: string; label?: string; name?: string; ours?: boolean; rps: Spread; cpuUsPerReq: Spread }[];
}

export const VERIFY_SERIES: string[];
export const BASELINE_LABEL: string;
export function escapeXml(value: unknown): string;
export function formatNumber(value: number, digits?: number): string;
export function formatBytes(size: number): string;
export function verifyChart(micro: MicroResults, options?: { series?: string[]; title?: string }): string;
export function httpChart(http: HttpResults, options?: { baseline?: string; title?: string }): string;
export function charts(results: { micro?: MicroResults; http?: HttpResults }): Record<string, string>;
