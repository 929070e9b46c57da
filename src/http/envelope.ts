// The response envelope of both Edge APIs (behaviour.md §1).
export const API_VERSION = '0.29.0';
export const API_ENROLLMENT_VERSION = '0.0.1';

export interface Meta {
  apiVersion: string;
  apiEnrollmentVersion: string;
  pagination?: { limit: number; offset: number; totalCount: number };
  filterableFields?: string[];
}

export function meta(extra: Partial<Meta> = {}): Meta {
  return { apiVersion: API_VERSION, apiEnrollmentVersion: API_ENROLLMENT_VERSION, ...extra };
}

export function envelope<T>(data: T, extra?: Partial<Meta>): { data: T; meta: Meta } {
  return { data, meta: meta(extra) };
}

export const EMPTY = Object.freeze({});
