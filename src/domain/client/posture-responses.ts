// Posture responses of a client: stored for its API session (posture-store.ts), and answered with
// the services whose posture the report just changed so the client can act on them. As in the
// established answer, that is the MFA kind: a device that woke or was unlocked asks again for the
// MFA of every MFA check that says so (promptOnWake, promptOnUnlock), and the services those checks
// guard are listed with their timeouts and the grace period (MFA_PROMPT_GRACE_MS) in which the
// code is due. Only the caller's own services are listed (those a service
// policy lets it dial or bind), never others that share the check.
import { Type } from '@sinclair/typebox';
import type { Clock } from '../../clock.js';
import { checkPasses, MFA_PROMPT_GRACE_MS, mfaAskedAgain, type PostureCheck, type PostureFacts } from '../../policy/posture.js';
import { compareText, type AccessViews } from './access-views.js';
import type { Caller } from './caller.js';
import type { PostureCheckCatalog, ServiceCatalog } from './catalogs.js';
import type { PostureResponse, PostureStore } from './posture-store.js';
import { factsOf } from './service-list.js';

/** A service whose posture a report changed (the established postureResponseService). */
export const PostureResponseServiceSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  postureQueryType: Type.String({ description: 'the kind of check whose state changed: MFA' }),
  timeout: Type.Integer({ description: 'seconds a passed MFA counts for; -1: no timeout' }),
  timeoutRemaining: Type.Integer({ description: 'seconds until the MFA must be answered again; 0: now' }),
});

export const PostureResponseAnswerSchema = Type.Object({ services: Type.Array(PostureResponseServiceSchema) });

export interface PostureResponseService {
  id: string;
  name: string;
  postureQueryType: string;
  timeout: number;
  timeoutRemaining: number;
}

export interface PostureResponsesDeps {
  clock: Clock;
  posture: Pick<PostureStore, 'submit' | 'of'>;
  access: Pick<AccessViews, 'of'>;
  checks: Pick<PostureCheckCatalog, 'get'>;
  catalog: Pick<ServiceCatalog, 'services'>;
}

/** Which endpoint-state events a batch of responses reports. */
function eventsOf(responses: readonly PostureResponse[]): { woken: boolean; unlocked: boolean } {
  const state = responses.filter((r) => r.typeId === 'MFA' || r.typeId === 'ENDPOINT_STATE');
  return { woken: state.some((r) => r.woken === true), unlocked: state.some((r) => r.unlocked === true) };
}

export class PostureResponses {
  constructor(private readonly d: PostureResponsesDeps) {}

  /**
   * Stores the responses of the caller's API session (all or none), then answers the caller's
   * services guarded by an MFA check that passed before the report and asks again after it.
   */
  async submit(caller: Caller, responses: readonly PostureResponse[]): Promise<{ services: PostureResponseService[] }> {
    const events = eventsOf(responses);
    const asking = events.woken || events.unlocked;
    const before = asking ? await factsOf(this.d.posture, caller, this.d.clock()) : undefined;
    await this.d.posture.submit({ apiSessionId: caller.apiSessionId, identityId: caller.identityId }, responses);
    if (!before) return { services: [] };
    const after = await factsOf(this.d.posture, caller, this.d.clock());
    return { services: await this.changedServices(caller, before, after) };
  }

  private async changedServices(
    caller: Caller,
    before: PostureFacts,
    after: PostureFacts,
  ): Promise<PostureResponseService[]> {
    const access = await this.d.access.of(caller.identityId);
    const catalog = await this.d.checks.get([...new Set([...access.checksOf.values()].flat())]);
    const changed = new Map<string, PostureCheck>();
    for (const c of catalog.values()) {
      if (c.typeId !== 'MFA') continue;
      // Asked again now: it passed, was not asking already, and asks after this report.
      if (checkPasses(c, before) && !mfaAskedAgain(c, before) && mfaAskedAgain(c, after)) changed.set(c.id, c);
    }
    if (changed.size === 0) return [];
    const found: { id: string; checks: PostureCheck[] }[] = [];
    for (const [serviceId, grants] of access.services) {
      const checks = [...new Set(grants.flatMap((g) => access.checksOf.get(g.policyId) ?? []))].map((id) => changed.get(id));
      const own = checks.filter((c): c is PostureCheck => c !== undefined);
      if (own.length > 0) found.push({ id: serviceId, checks: own });
    }
    const entities = await this.d.catalog.services(found.map((f) => f.id));
    const out: PostureResponseService[] = [];
    for (const f of found) {
      const entity = entities.get(f.id);
      if (!entity) continue;
      // The shortest timeout of the checks that ask again (-1 when none has one).
      const timeouts = f.checks.map((c) => c.timeoutSeconds ?? -1).filter((t) => t >= 0);
      out.push({
        id: f.id,
        name: String(entity.name),
        postureQueryType: 'MFA',
        timeout: timeouts.length > 0 ? Math.min(...timeouts) : -1,
        // Each check listed passes for the grace period after the report: the MFA is due by then.
        timeoutRemaining: MFA_PROMPT_GRACE_MS / 1000,
      });
    }
    return out.sort((a, b) => compareText(a.name, b.name) || compareText(a.id, b.id));
  }
}
