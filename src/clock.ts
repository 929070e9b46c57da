// Time is injected everywhere it matters, so tests can move it.
export type Clock = () => number;

export const systemClock: Clock = () => Date.now();

/** RFC 3339 UTC with milliseconds, the one date format of every answer and of the store. */
export function iso(ms: number): string {
  return new Date(ms).toISOString();
}
