// What a controller keeps about itself in controller_state (key → JSON value): its id, made at its
// first start and kept across restarts and new certificates; and the check of the secrets key that
// sealed the store's secrets, so that a start with another key is refused instead of serving a store
// it cannot read.
import type { Dialect } from './dialect.js';
import type { Executor } from './store.js';

/** controller_state key of this controller's id. */
export const CONTROLLER_ID_KEY = 'controller-id';
/** controller_state key of the check of the key the store's secrets are sealed under (SecretBox.keyCheck). */
export const SECRETS_KEY_CHECK_KEY = 'secrets-key-check';

/** The text kept under `key`, or undefined without one. */
async function textOf(ex: Executor, dialect: Dialect, key: string): Promise<string | undefined> {
  const row = await ex.selectFrom('controller_state').select('value').where('key', '=', key).executeTakeFirst();
  if (!row) return undefined;
  const value = dialect.fromDb('json', row.value);
  return typeof value === 'string' && value !== '' ? value : undefined;
}

/** This controller's id, or undefined before it first registered. */
export function controllerIdOf(ex: Executor, dialect: Dialect): Promise<string | undefined> {
  return textOf(ex, dialect, CONTROLLER_ID_KEY);
}

/** The check of the key that sealed the store, or undefined before one was recorded. */
export function secretsKeyCheckOf(ex: Executor, dialect: Dialect): Promise<string | undefined> {
  return textOf(ex, dialect, SECRETS_KEY_CHECK_KEY);
}
