// RFC 3339 date-times as the filter language accepts them, normalised to the stored form.
//
// Accepted: `YYYY-MM-DDTHH:mm:ss[.fraction](Z|+hh:mm|-hh:mm)`; `T` and `Z` in either case; the offset is
// required; the fraction has 1 to 9 digits and is truncated to milliseconds (isSubMillisecond tells
// whether that dropped anything); leap seconds (`:60`) are refused. The result is UTC with milliseconds, `YYYY-MM-DDTHH:mm:ss.sssZ`, which is how datetime
// columns are stored, so comparing the strings orders them by time.

const RFC3339 =
  /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;

const STORED = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

function daysInMonth(year: number, month: number): number {
  if (month === 2) {
    const leap = (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
    return leap ? 29 : 28;
  }
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}

/** The stored form of an RFC 3339 date-time, or undefined when `text` is not one (or leaves years 0000-9999). */
export function normaliseDateTime(text: string): string | undefined {
  const m = RFC3339.exec(text);
  if (!m) return undefined;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [
    number, number, number, number, number, number,
  ];
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return undefined;
  if (hour > 23 || minute > 59 || second > 59) return undefined;
  const millis = Number((m[7] ?? '').padEnd(3, '0').slice(0, 3));
  let offsetMinutes = 0;
  if (m[9] !== undefined) {
    const oh = Number(m[10]);
    const om = Number(m[11]);
    if (oh > 23 || om > 59) return undefined;
    offsetMinutes = (m[9] === '-' ? -1 : 1) * (oh * 60 + om);
  }
  // setUTCFullYear, unlike Date.UTC, does not map years 0-99 onto 1900-1999.
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day);
  date.setUTCHours(hour, minute - offsetMinutes, second, millis);
  // Stryker: with the fields checked above the date is always valid; a guard only.
  if (Number.isNaN(date.getTime())) return undefined;
  const iso = date.toISOString();
  return STORED.test(iso) ? iso : undefined;
}

/**
 * Whether an RFC 3339 date-time names an instant between two milliseconds: fraction digits past the
 * third that are not all 0, which normaliseDateTime drops. Stored datetimes are whole milliseconds,
 * so such an instant equals none of them.
 */
export function isSubMillisecond(text: string): boolean {
  const m = RFC3339.exec(text);
  return m !== null && /[1-9]/.test((m[7] ?? '').slice(3));
}
