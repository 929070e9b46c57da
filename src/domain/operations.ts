// Revocations, controller settings and the controllers list beyond CRUD.
import type { ResourceBehaviour } from './resources.js';

export function revocationBehaviour(): ResourceBehaviour {
  return {};
}

export function controllerSettingBehaviour(): ResourceBehaviour {
  return {};
}
