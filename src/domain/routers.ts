// Edge routers, routers and terminators beyond CRUD.
import type { ResourceBehaviour } from './resources.js';

export function edgeRouterBehaviour(): ResourceBehaviour {
  return {};
}

export function routerBehaviour(): ResourceBehaviour {
  return {};
}

export function terminatorBehaviour(): ResourceBehaviour {
  return {};
}
