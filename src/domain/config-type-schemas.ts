// The config types every controller starts with (behaviour.md §10) and their JSON schemas. Each
// schema is draft-07 and closed: an object carries exactly the properties listed, nothing else.
// Addresses, durations and ranges are checked here so that a config a tunneler receives is one it
// can use.

export const JSON_SCHEMA_DRAFT_07 = 'http://json-schema.org/draft-07/schema#';

type Schema = Record<string, unknown>;

const ref = (name: string): Schema => ({ $ref: `#/definitions/${name}` });

const OCTET = '(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])';
const LABEL = '[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?';
/** Go duration syntax: `5s`, `1m30s`, `250ms`, `0`. */
const DURATION = '^(?:0|(?:[0-9]+(?:\\.[0-9]+)?(?:ns|us|µs|ms|s|m|h))+)$';

/** Shared by every seeded schema; `#/definitions/<name>` inside each document. */
const definitions: Record<string, Schema> = {
  port: { type: 'integer', minimum: 0, maximum: 65535 },
  protocol: { type: 'string', enum: ['tcp', 'udp'] },
  protocols: {
    type: 'array',
    description: 'a non-empty set of protocols',
    minItems: 1,
    uniqueItems: true,
    items: ref('protocol'),
  },
  portRange: {
    type: 'object',
    additionalProperties: false,
    required: ['low', 'high'],
    properties: { low: ref('port'), high: ref('port') },
  },
  portRanges: { type: 'array', minItems: 1, items: ref('portRange') },
  ipAddress: {
    type: 'string',
    description: 'an IPv4 or IPv6 address',
    anyOf: [{ format: 'ipv4' }, { format: 'ipv6' }],
  },
  hostname: { type: 'string', format: 'hostname', minLength: 1, maxLength: 253 },
  cidr: {
    type: 'string',
    description: 'a CIDR block',
    anyOf: [
      { pattern: `^(?:${OCTET}\\.){3}${OCTET}/(?:3[0-2]|[12]?[0-9])$` },
      { pattern: '^[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*/(?:12[0-8]|1[01][0-9]|[1-9]?[0-9])$' },
    ],
  },
  wildcardDomain: { type: 'string', pattern: `^\\*\\.(?:${LABEL}\\.)*${LABEL}$`, maxLength: 255 },
  hostAddress: {
    description: 'a host name or an IP address',
    anyOf: [ref('ipAddress'), ref('hostname')],
  },
  listenAddress: {
    description: 'a host name, an IP address, a CIDR block or a *.domain wildcard',
    anyOf: [ref('ipAddress'), ref('hostname'), ref('cidr'), ref('wildcardDomain')],
  },
  listenAddresses: { type: 'array', minItems: 1, uniqueItems: true, items: ref('listenAddress') },
  duration: { type: 'string', description: 'a duration such as 5s, 1m30s or 250ms', pattern: DURATION },
  timeoutSeconds: { type: 'integer', minimum: 0, maximum: 2147483647 },
  cost: { type: 'integer', minimum: 0, maximum: 65535 },
  action: {
    type: 'object',
    additionalProperties: false,
    required: ['trigger', 'action'],
    properties: {
      trigger: { type: 'string', enum: ['fail', 'pass', 'change'] },
      action: {
        type: 'string',
        description: 'mark healthy, mark unhealthy, increase cost N, decrease cost N or send event',
        pattern: '^(?:mark healthy|mark unhealthy|increase cost [0-9]+|decrease cost [0-9]+|send event)$',
      },
      consecutiveEvents: { type: 'integer', minimum: 0, maximum: 65535 },
      duration: ref('duration'),
    },
  },
  actions: { type: 'array', items: ref('action') },
  portCheck: {
    type: 'object',
    additionalProperties: false,
    required: ['address', 'interval', 'timeout'],
    properties: {
      address: { type: 'string', minLength: 1, description: 'host:port to connect to' },
      interval: ref('duration'),
      timeout: ref('duration'),
      actions: ref('actions'),
    },
  },
  httpCheck: {
    type: 'object',
    additionalProperties: false,
    required: ['url', 'interval', 'timeout'],
    properties: {
      url: { type: 'string', minLength: 1 },
      // What a check asks and expects; the established defaults are GET and 200.
      method: { type: 'string', enum: ['GET', 'POST', 'PUT', 'PATCH'] },
      body: { type: 'string' },
      expectStatus: { type: 'integer', minimum: 100, maximum: 599 },
      expectInBody: { type: 'string' },
      interval: ref('duration'),
      timeout: ref('duration'),
      actions: ref('actions'),
    },
  },
  forwardAddressTranslation: {
    type: 'object',
    additionalProperties: false,
    required: ['from', 'to', 'prefixLength'],
    properties: {
      from: ref('ipAddress'),
      to: ref('ipAddress'),
      prefixLength: { type: 'integer', minimum: 0, maximum: 128 },
    },
  },
  listenOptions: {
    type: 'object',
    additionalProperties: false,
    properties: {
      bindUsingEdgeIdentity: { type: 'boolean' },
      connectTimeout: ref('duration'),
      connectTimeoutSeconds: ref('timeoutSeconds'),
      cost: ref('cost'),
      identity: { type: 'string' },
      maxConnections: { type: 'integer', minimum: 1, maximum: 2147483647 },
      precedence: { type: 'string', enum: ['default', 'required', 'failed'] },
    },
  },
};

/**
 * `forward<Thing>: true` with `allowed<Things>`, or a fixed `<thing>`: never both, never neither.
 * A property of the other branch is refused rather than silently ignored.
 */
function eitherFixedOrForwarded(fixed: string, forward: string, allowed: string): Schema {
  return {
    if: { properties: { [forward]: { const: true } }, required: [forward] },
    then: { required: [allowed], properties: { [fixed]: false } },
    else: { required: [fixed], properties: { [allowed]: false } },
  };
}

/** host.v1, without the document keywords (host.v2 embeds it). */
const host: Schema = {
  type: 'object',
  additionalProperties: false,
  allOf: [
    eitherFixedOrForwarded('protocol', 'forwardProtocol', 'allowedProtocols'),
    eitherFixedOrForwarded('address', 'forwardAddress', 'allowedAddresses'),
    eitherFixedOrForwarded('port', 'forwardPort', 'allowedPortRanges'),
  ],
  properties: {
    protocol: ref('protocol'),
    forwardProtocol: { type: 'boolean' },
    allowedProtocols: ref('protocols'),
    address: ref('hostAddress'),
    forwardAddress: { type: 'boolean' },
    allowedAddresses: ref('listenAddresses'),
    port: ref('port'),
    forwardPort: { type: 'boolean' },
    allowedPortRanges: ref('portRanges'),
    forwardAddressTranslations: { type: 'array', items: ref('forwardAddressTranslation') },
    allowedSourceAddresses: { type: 'array', items: ref('listenAddress') },
    listenOptions: ref('listenOptions'),
    portChecks: { type: 'array', items: ref('portCheck') },
    httpChecks: { type: 'array', items: ref('httpCheck') },
    proxy: {
      type: 'object',
      additionalProperties: false,
      required: ['type', 'address'],
      properties: {
        type: { type: 'string', enum: ['http'] },
        address: { type: 'string', minLength: 1, description: 'host:port of the proxy' },
      },
    },
  },
};

function document(title: string, body: Schema, extra: Record<string, Schema> = {}): Schema {
  return { $schema: JSON_SCHEMA_DRAFT_07, title, ...body, definitions: { ...definitions, ...extra } };
}

export const INTERCEPT_V1 = document('intercept.v1', {
  description: 'what a dialing tunneler intercepts for the service',
  type: 'object',
  additionalProperties: false,
  required: ['protocols', 'addresses', 'portRanges'],
  properties: {
    protocols: ref('protocols'),
    addresses: ref('listenAddresses'),
    portRanges: ref('portRanges'),
    dialOptions: {
      type: 'object',
      additionalProperties: false,
      properties: {
        identity: { type: 'string' },
        connectTimeoutSeconds: ref('timeoutSeconds'),
      },
    },
    sourceIp: { type: 'string' },
    allowedSourceAddresses: { type: 'array', items: { type: 'string' } },
  },
});

export const HOST_V1 = document('host.v1', { description: 'where a hosting tunneler forwards the service', ...host });

export const HOST_V2 = document(
  'host.v2',
  {
    description: 'several host.v1 terminators for one hosting tunneler',
    type: 'object',
    additionalProperties: false,
    required: ['terminators'],
    properties: { terminators: { type: 'array', minItems: 1, items: ref('host') } },
  },
  { host },
);

export const PROXY_V1 = document('proxy.v1', {
  description: 'a local proxy listener for the service',
  type: 'object',
  additionalProperties: false,
  required: ['port', 'protocols'],
  properties: {
    port: { type: 'integer', minimum: 1, maximum: 65535 },
    protocols: ref('protocols'),
    binding: { type: 'string' },
  },
});

export interface SeededConfigType {
  /** Fixed id: the name itself, so `configTypes` may name it either way. */
  id: string;
  name: string;
  target: 'service' | 'router';
  schema: Schema;
}

export const SEEDED_CONFIG_TYPES: readonly SeededConfigType[] = [
  { id: 'intercept.v1', name: 'intercept.v1', target: 'service', schema: INTERCEPT_V1 },
  { id: 'host.v1', name: 'host.v1', target: 'service', schema: HOST_V1 },
  { id: 'host.v2', name: 'host.v2', target: 'service', schema: HOST_V2 },
  { id: 'proxy.v1', name: 'proxy.v1', target: 'service', schema: PROXY_V1 },
];

export const SEEDED_CONFIG_TYPE_IDS: ReadonlySet<string> = new Set(SEEDED_CONFIG_TYPES.map((t) => t.id));
