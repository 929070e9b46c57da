import { sql } from 'kysely';
import type { Db, Dialect } from '../dialect.js';
import type { StoreMigration } from '../store.js';
import { createEntityTable } from './ddl.js';

/** A link table: one row per (left, right) pair, indexed both ways, removed with either side. */
async function createLinkTable(db: Db, d: Dialect, table: string, left: [string, string], right: [string, string]): Promise<void> {
  await db.schema
    .createTable(table)
    .addColumn(left[0], sql.raw(d.columnType('text')), (c) => c.notNull().references(`${left[1]}.id`).onDelete('cascade'))
    .addColumn(right[0], sql.raw(d.columnType('text')), (c) => c.notNull().references(`${right[1]}.id`).onDelete('cascade'))
    .addPrimaryKeyConstraint(`${table}_pk`, [left[0], right[0]])
    .execute();
  await db.schema.createIndex(`${table}_reverse`).on(table).columns([right[0], left[0]]).execute();
}

/** Services, configs, routers, terminators, policies, posture checks and operations records. */
export const m0003Network: StoreMigration = {
  name: '0003-network',
  async up(db, d) {
    await createEntityTable(db, d, 'config_types', {
      name: { type: 'text', notNull: true, unique: true },
      schema: { type: 'json', notNull: true, default: "'{}'" },
      target: { type: 'text', notNull: true, default: "'service'" },
    });
    await createEntityTable(db, d, 'configs', {
      name: { type: 'text', notNull: true, unique: true },
      config_type_id: { type: 'text', notNull: true, references: { table: 'config_types', onDelete: 'restrict' } },
      data: { type: 'json', notNull: true },
    });
    await createEntityTable(db, d, 'services', {
      name: { type: 'text', notNull: true, unique: true },
      encryption_required: { type: 'boolean', notNull: true, default: 1 },
      max_idle_time_millis: { type: 'integer', notNull: true, default: 0 },
      role_attributes: { type: 'json', notNull: true, default: "'[]'" },
      terminator_strategy: { type: 'text', notNull: true, default: "'smartrouting'" },
    });
    await createEntityTable(db, d, 'edge_routers', {
      name: { type: 'text', notNull: true, unique: true },
      cost: { type: 'integer', notNull: true, default: 0 },
      disabled: { type: 'boolean', notNull: true, default: 0 },
      is_tunneler_enabled: { type: 'boolean', notNull: true, default: 0 },
      no_traversal: { type: 'boolean', notNull: true, default: 0 },
      role_attributes: { type: 'json', notNull: true, default: "'[]'" },
      configs: { type: 'json', notNull: true, default: "'[]'" },
      app_data: { type: 'json' },
      ctrl_chan_listeners: { type: 'json' },
      fingerprint: { type: 'text' },
      hostname: { type: 'text', notNull: true, default: "''" },
      is_online: { type: 'boolean', notNull: true, default: 0 },
      is_verified: { type: 'boolean', notNull: true, default: 0 },
      supported_protocols: { type: 'json', notNull: true, default: "'{}'" },
    });
    await createEntityTable(db, d, 'routers', {
      name: { type: 'text', notNull: true, unique: true },
      cost: { type: 'integer', notNull: true, default: 0 },
      disabled: { type: 'boolean', notNull: true, default: 0 },
      no_traversal: { type: 'boolean', notNull: true, default: 0 },
      ctrl_chan_listeners: { type: 'json' },
      fingerprint: { type: 'text' },
      is_online: { type: 'boolean', notNull: true, default: 0 },
      is_verified: { type: 'boolean', notNull: true, default: 0 },
    });
    await createEntityTable(db, d, 'terminators', {
      service_id: { type: 'text', notNull: true, references: { table: 'services', onDelete: 'cascade' } },
      router_id: { type: 'text', notNull: true },
      address: { type: 'text', notNull: true },
      binding: { type: 'text', notNull: true },
      cost: { type: 'integer', notNull: true, default: 0 },
      precedence: { type: 'text', notNull: true, default: "'default'" },
      identity: { type: 'text', notNull: true, default: "''" },
      identity_secret_hash: { type: 'text' },
    });
    await db.schema.createIndex('terminators_router_id_idx').on('terminators').column('router_id').execute();
    const policy = {
      name: { type: 'text', notNull: true, unique: true },
      semantic: { type: 'text', notNull: true },
    } as const;
    await createEntityTable(db, d, 'service_policies', {
      ...policy,
      type: { type: 'text', notNull: true },
      identity_roles: { type: 'json', notNull: true, default: "'[]'" },
      service_roles: { type: 'json', notNull: true, default: "'[]'" },
      posture_check_roles: { type: 'json', notNull: true, default: "'[]'" },
    });
    await createEntityTable(
      db,
      d,
      'edge_router_policies',
      {
        ...policy,
        edge_router_roles: { type: 'json', notNull: true, default: "'[]'" },
        identity_roles: { type: 'json', notNull: true, default: "'[]'" },
      },
      { system: true },
    );
    await createEntityTable(db, d, 'service_edge_router_policies', {
      ...policy,
      edge_router_roles: { type: 'json', notNull: true, default: "'[]'" },
      service_roles: { type: 'json', notNull: true, default: "'[]'" },
    });
    await createEntityTable(db, d, 'posture_check_types', {
      name: { type: 'text', notNull: true, unique: true },
      operating_systems: { type: 'json', notNull: true, default: "'[]'" },
    });
    await createEntityTable(db, d, 'posture_checks', {
      name: { type: 'text', notNull: true, unique: true },
      type_id: { type: 'text', notNull: true, references: { table: 'posture_check_types', onDelete: 'restrict' } },
      role_attributes: { type: 'json', notNull: true, default: "'[]'" },
      domains: { type: 'json' },
      operating_systems: { type: 'json' },
      process: { type: 'json' },
      processes: { type: 'json' },
      semantic: { type: 'text' },
      mac_addresses: { type: 'json' },
      timeout_seconds: { type: 'integer' },
      prompt_on_wake: { type: 'boolean' },
      prompt_on_unlock: { type: 'boolean' },
      ignore_legacy_endpoints: { type: 'boolean' },
    });
    await createEntityTable(db, d, 'revocations', {
      type: { type: 'text', notNull: true },
      expires_at: { type: 'text' },
    });
    await createEntityTable(db, d, 'controller_settings', {
      controller_id: { type: 'text', notNull: true },
      oidc: { type: 'json', notNull: true, default: "'{}'" },
    });
    await createEntityTable(db, d, 'controllers', {
      name: { type: 'text', notNull: true, unique: true },
      address: { type: 'text', notNull: true, default: "''" },
      ctrl_address: { type: 'text', notNull: true, default: "''" },
      cert_pem: { type: 'text', notNull: true, default: "''" },
      fingerprint: { type: 'text', notNull: true, default: "''" },
      is_online: { type: 'boolean', notNull: true, default: 0 },
      last_joined_at: { type: 'text' },
      api_addresses: { type: 'json', notNull: true, default: "'{}'" },
    });

    // Associations and the policy links the policy engine keeps exact.
    await createLinkTable(db, d, 'service_configs', ['service_id', 'services'], ['config_id', 'configs']);
    await db.schema
      .createTable('identity_service_configs')
      .addColumn('identity_id', sql.raw(d.columnType('text')), (c) => c.notNull().references('identities.id').onDelete('cascade'))
      .addColumn('service_id', sql.raw(d.columnType('text')), (c) => c.notNull().references('services.id').onDelete('cascade'))
      .addColumn('config_id', sql.raw(d.columnType('text')), (c) => c.notNull().references('configs.id').onDelete('cascade'))
      .addPrimaryKeyConstraint('identity_service_configs_pk', ['identity_id', 'service_id', 'config_id'])
      .execute();
    await db.schema.createIndex('identity_service_configs_config').on('identity_service_configs').column('config_id').execute();
    await createLinkTable(db, d, 'service_policy_identities', ['policy_id', 'service_policies'], ['identity_id', 'identities']);
    await createLinkTable(db, d, 'service_policy_services', ['policy_id', 'service_policies'], ['service_id', 'services']);
    await createLinkTable(db, d, 'service_policy_posture_checks', ['policy_id', 'service_policies'], ['posture_check_id', 'posture_checks']);
    await createLinkTable(db, d, 'edge_router_policy_identities', ['policy_id', 'edge_router_policies'], ['identity_id', 'identities']);
    await createLinkTable(db, d, 'edge_router_policy_edge_routers', ['policy_id', 'edge_router_policies'], ['edge_router_id', 'edge_routers']);
    await createLinkTable(db, d, 'service_edge_router_policy_services', ['policy_id', 'service_edge_router_policies'], ['service_id', 'services']);
    await createLinkTable(
      db,
      d,
      'service_edge_router_policy_edge_routers',
      ['policy_id', 'service_edge_router_policies'],
      ['edge_router_id', 'edge_routers'],
    );
    // Which entities carry a role attribute: kind is identity, service, edge-router or posture-check.
    await db.schema
      .createTable('role_attribute_index')
      .addColumn('kind', sql.raw(d.columnType('text')), (c) => c.notNull())
      .addColumn('attribute', sql.raw(d.columnType('text')), (c) => c.notNull())
      .addColumn('entity_id', sql.raw(d.columnType('text')), (c) => c.notNull())
      .addPrimaryKeyConstraint('role_attribute_index_pk', ['kind', 'attribute', 'entity_id'])
      .execute();
    await db.schema.createIndex('role_attribute_index_entity').on('role_attribute_index').columns(['kind', 'entity_id']).execute();
  },
};
