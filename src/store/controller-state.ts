// What a controller keeps about itself in controller_state (key → JSON value): its id, made at its
// first start and kept across restarts and new certificates.
import type { Dialect } from './dialect.js';
import type { Executor } from './store.js';

/** controller_state key of this controller's id. */
export const CONTROLLER_ID_KEY = 'controller-id';

/** This controller's id, or undefined before it first registered. */
export async function controllerIdOf(ex: Executor, dialect: Dialect): Promise<string | undefined> {
  const row = await ex.selectFrom('controller_state').select('value').where('key', '=', CONTROLLER_ID_KEY).executeTakeFirst();
  if (!row) return undefined;
  const value = dialect.fromDb('json', row.value);
  return typeof value === 'string' && value !== '' ? value : undefined;
}
