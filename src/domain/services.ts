// Services, config types and configs beyond CRUD.
import type { ResourceBehaviour, WriteContext } from './resources.js';

export function serviceBehaviour(): ResourceBehaviour {
  return {};
}

export function configTypeBehaviour(): ResourceBehaviour {
  return {};
}

export function configBehaviour(): ResourceBehaviour {
  return {};
}

/** The config types every controller starts with. */
export async function seedConfigTypes(ctx: WriteContext): Promise<void> {
  void ctx;
}
