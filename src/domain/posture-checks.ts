// Posture checks beyond CRUD: the fields of each kind.
import type { ResourceBehaviour, WriteContext } from './resources.js';

export function postureCheckBehaviour(): ResourceBehaviour {
  return {};
}

/** The posture check types every controller starts with. */
export async function seedPostureCheckTypes(ctx: WriteContext): Promise<void> {
  void ctx;
}
