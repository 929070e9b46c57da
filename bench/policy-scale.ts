// Policy link maintenance at the scale targets, run by hand (not part of `npm run bench`, whose scale
// section measures the same two changes over HTTP on the generated store of bench/scale-store.ts):
//
//   npm run build && node dist/bench/policy-scale.js [--memory]
//
// Fills a fresh file store (or an in-memory one with --memory) directly through Kysely with 100,000
// identities (role attributes from a pool of 500), 10,000 services, 100 edge routers and 2,000
// policies with their links, then times, through ResourceService as the API would:
//   - changing one identity's role attributes (target ≤ 50 ms), cold (first write, policy index
//     loaded) and warm;
//   - creating a service policy that selects 10,000 identities (target ≤ 2 s).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { pino } from 'pino';
import { createApp } from '../src/app/app.js';
import { loadConfig } from '../src/config/index.js';
import { entitiesMatching } from '../src/policy/links.js';
import type { PolicyCollection } from '../src/resources/relations.js';
import { parseRoles } from '../src/policy/roles.js';
import type { ResourceService } from '../src/domain/resources.js';
import type { Entity } from '../src/store/repository.js';
import type { Executor } from '../src/store/store.js';

const IDENTITIES = 100_000;
const SERVICES = 10_000;
const ROUTERS = 100;
const POLICIES = { 'service-policies': 1_200, 'edge-router-policies': 400, 'service-edge-router-policies': 400 } as const;
const POOL = 500;
/** Identities carrying the attribute the large policy selects. */
const BIG = 10_000;

let seed = 42;
function random(): number {
  seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
  return seed / 2 ** 31;
}
const int = (n: number) => Math.floor(random() * n);
const attr = () => `attr-${int(POOL)}`;
const attrs = (max: number) => [...new Set(Array.from({ length: 1 + int(max) }, attr))];

function ms(since: number): string {
  return `${(performance.now() - since).toFixed(1)} ms`;
}

/** A full row of a resource from its definition's defaults, plus the given values. */
function entity(service: ResourceService, id: string, now: string, values: Record<string, unknown>): Entity {
  const e: Record<string, unknown> = { id, createdAt: now, updatedAt: now, tags: {} };
  if (service.def.system) e.isSystem = false;
  for (const [name, f] of Object.entries(service.def.fields)) {
    if (f.virtual) continue;
    const d = f.default;
    e[name] = d === undefined ? null : typeof d === 'object' && d !== null ? structuredClone(d) : d;
  }
  return Object.assign(e, values) as Entity;
}

async function insertAll(ex: Executor, service: ResourceService, rows: Entity[]): Promise<void> {
  const perRow = service.repo.columns.length;
  const size = Math.floor(30_000 / perRow);
  for (let i = 0; i < rows.length; i += size) {
    await ex
      .insertInto(service.def.table)
      .values(rows.slice(i, i + size).map((r) => service.repo.toRow(r)))
      .execute();
  }
}

async function main(): Promise<void> {
  const memory = process.argv.includes('--memory');
  const dir = mkdtempSync(join(tmpdir(), 'overlay-policy-scale-'));
  const config = loadConfig({ dataDir: dir, listen: '127.0.0.1:0' }, {});
  const app = await createApp(config, { log: pino({ level: 'silent' }), memoryStore: memory, announce: () => undefined });
  const { resources, store } = app.core;
  const now = new Date().toISOString();
  try {
    let t0 = performance.now();
    const identities = resources.get('identities');
    const services = resources.get('services');
    const routers = resources.get('edge-routers');
    const identityRows: Entity[] = [];
    for (let i = 0; i < IDENTITIES; i++) {
      const roleAttributes = attrs(5);
      if (i < BIG) roleAttributes.push('big');
      identityRows.push(entity(identities, `id-${i}`, now, { name: `identity-${i}`, type: 'Device', isAdmin: false, roleAttributes }));
    }
    const serviceRows = Array.from({ length: SERVICES }, (_, i) =>
      entity(services, `svc-${i}`, now, { name: `service-${i}`, roleAttributes: attrs(3) }),
    );
    const routerRows = Array.from({ length: ROUTERS }, (_, i) =>
      entity(routers, `er-${i}`, now, { name: `router-${i}`, roleAttributes: attrs(3) }),
    );
    await resources.write(async (ctx) => {
      await insertAll(ctx.tx, identities, identityRows);
      await insertAll(ctx.tx, services, serviceRows);
      await insertAll(ctx.tx, routers, routerRows);
      const index: { kind: string; attribute: string; entity_id: string }[] = [];
      for (const [kind, rows] of [['identity', identityRows], ['service', serviceRows], ['edge-router', routerRows]] as const) {
        for (const r of rows) for (const a of r.roleAttributes as string[]) index.push({ kind, attribute: a, entity_id: r.id });
      }
      for (let i = 0; i < index.length; i += 10_000) {
        await ctx.tx.insertInto('role_attribute_index').values(index.slice(i, i + 10_000)).execute();
      }
    });
    console.log(`entities: ${IDENTITIES} identities, ${SERVICES} services, ${ROUTERS} edge routers in ${ms(t0)}`);

    // Policies: mostly AnyOf of one or two attributes (a few hundred identities each), some AllOf,
    // a few #all and @id lists; links computed by the engine as a policy write would.
    t0 = performance.now();
    let links = 0;
    await resources.write(async (ctx) => {
      for (const [collection, count] of Object.entries(POLICIES) as [PolicyCollection, number][]) {
        const service = resources.get(collection);
        const lists = Object.keys(service.def.fields).filter((f) => f.endsWith('Roles'));
        for (let i = 0; i < count; i++) {
          const roles: Record<string, string[]> = {};
          for (const f of lists) {
            const r = random();
            roles[f] =
              r < 0.01 ? ['#all'] : r < 0.1 ? [`@${f === 'identityRoles' ? 'id' : f === 'serviceRoles' ? 'svc' : 'er'}-${int(100)}`] : attrs(2).map((a) => `#${a}`);
          }
          const policy = entity(service, `${collection}-${i}`, now, {
            name: `${collection}-${i}`,
            semantic: random() < 0.8 ? 'AnyOf' : 'AllOf',
            ...(collection === 'service-policies' && { type: random() < 0.5 ? 'Dial' : 'Bind' }),
            ...roles,
          });
          await service.repo.insert(ctx.tx, policy);
          await app.core.links.refreshPolicyLinks(ctx, collection, policy);
        }
      }
    });
    for (const table of [
      'service_policy_identities',
      'service_policy_services',
      'edge_router_policy_identities',
      'edge_router_policy_edge_routers',
      'service_edge_router_policy_services',
      'service_edge_router_policy_edge_routers',
    ]) {
      const row = await store.db.selectFrom(table).select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
      links += Number(row.n);
    }
    console.log(`policies: 2000 with ${links} link rows in ${ms(t0)}`);

    // A rolled-back write that touched the policy index makes the next writer reload it, as after a
    // restart: the first timed change pays for loading 2,000 policies.
    await resources
      .write(async (ctx) => {
        await app.core.links.forgetPolicy(ctx, 'service-policies', 'none');
        throw new Error('rolled back');
      })
      .catch(() => undefined);
    const times: number[] = [];
    for (let i = 0; i < 50; i++) {
      const id = `id-${BIG + int(IDENTITIES - BIG)}`;
      const start = performance.now();
      await identities.patch(id, { roleAttributes: attrs(5) });
      times.push(performance.now() - start);
    }
    const sorted = [...times].sort((a, b) => a - b);
    console.log(
      `identity role attribute change (ResourceService.patch, ${times.length} runs): first ${times[0]!.toFixed(1)} ms, ` +
        `median ${sorted[Math.floor(sorted.length / 2)]!.toFixed(1)} ms, p90 ${sorted[Math.floor(sorted.length * 0.9)]!.toFixed(1)} ms, ` +
        `max ${sorted[sorted.length - 1]!.toFixed(1)} ms`,
    );

    // Where the time of the big policy goes: selecting its identities, then the whole write.
    t0 = performance.now();
    const selected = await entitiesMatching(store.db, 'identity', 'AllOf', parseRoles(['#big']));
    console.log(`  selecting the ${selected.size} identities of #big from role_attribute_index: ${ms(t0)}`);
    t0 = performance.now();
    const big = await resources.get('service-policies').create({
      name: 'big-policy',
      type: 'Dial',
      semantic: 'AllOf',
      identityRoles: ['#big'],
      serviceRoles: ['#attr-1'],
    });
    const created = ms(t0);
    const n = await store.db
      .selectFrom('service_policy_identities')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('policy_id', '=', big.id)
      .executeTakeFirstOrThrow();
    console.log(`service policy selecting ${Number(n.n)} identities (ResourceService.create): ${created}`);
    t0 = performance.now();
    await resources.get('service-policies').patch(big.id, { identityRoles: ['#big', '#attr-2'], semantic: 'AnyOf' });
    console.log(`  widening it to AnyOf #big, #attr-2 (diff only): ${ms(t0)}`);
    t0 = performance.now();
    await resources.get('service-policies').delete(big.id);
    console.log(`  deleting it (links cascade): ${ms(t0)}`);
  } finally {
    await app.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
