// The part of oidc-provider's API the benchmark's peer server uses (the package ships no types).
declare module 'oidc-provider' {
  import type { IncomingMessage, ServerResponse } from 'node:http';

  interface Account {
    accountId: string;
    claims(): Promise<Record<string, unknown>>;
  }

  interface Configuration {
    clients?: Record<string, unknown>[];
    jwks?: { keys: Record<string, unknown>[] };
    cookies?: { keys: string[] };
    findAccount?(ctx: unknown, id: string): Promise<Account | undefined>;
    features?: Record<string, unknown>;
    scopes?: string[];
    ttl?: Record<string, number>;
    rotateRefreshToken?: boolean;
    pkce?: { required?(): boolean };
  }

  interface Model {
    save(): Promise<string>;
  }

  class Grant implements Model {
    constructor(values: { accountId: string; clientId: string });
    addOIDCScope(scope: string): void;
    save(): Promise<string>;
  }

  class RefreshToken implements Model {
    constructor(values: Record<string, unknown>);
    save(): Promise<string>;
  }

  export default class Provider {
    constructor(issuer: string, configuration?: Configuration);
    callback(): (req: IncomingMessage, res: ServerResponse) => Promise<void>;
    on(event: string, listener: (...args: never[]) => void): this;
    readonly Client: { find(id: string): Promise<unknown> };
    readonly Grant: typeof Grant;
    readonly RefreshToken: typeof RefreshToken;
  }
}
