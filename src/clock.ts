// Time is injected everywhere it matters, so tests can move it.
export type Clock = () => number;

export const systemClock: Clock = () => Date.now();

/** RFC 3339 UTC with milliseconds, the one date format of every answer and of the store. */
export function iso(ms: number): string {
  // The values of one request are stamped with the same instant, and formatting costs a microsecond
  // or more: the last one is kept. (An invalid time never matches, so it still throws.)
  if (ms !== lastMs) {
    lastText = new Date(ms).toISOString();
    lastMs = ms;
  }
  return lastText;
}

let lastMs = NaN;
let lastText = '';
