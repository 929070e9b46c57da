// Every resource definition of the controller. The store's migrations must produce exactly the
// tables these imply (test/schema.test.ts checks it).
import type { ResourceDef } from './kit.js';

export const resourceDefs: readonly ResourceDef[] = [];

export function tableOf(collection: string): string {
  const def = resourceDefs.find((d) => d.name === collection);
  return def?.table ?? collection.replace(/-/g, '_');
}
