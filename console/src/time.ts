// Times as the console reads and shows them.

/** An RFC 3339 time in milliseconds (finer fractions dropped, which `Date.parse` may not read); null if none. */
export function instant(text: string | null | undefined): number | null {
  if (!text) return null;
  const ms = Date.parse(text.replace(/(\.\d{3})\d+/, '$1'));
  return Number.isNaN(ms) ? null : ms;
}

/** A duration in milliseconds as people read it: `840 ms`, `1.25 s`, `12.5 s`. */
export function formatDuration(ms: number): string {
  const value = Math.max(0, ms);
  if (value < 1000) return `${Math.round(value)} ms`;
  return `${(value / 1000).toFixed(value < 10_000 ? 2 : 1)} s`;
}
