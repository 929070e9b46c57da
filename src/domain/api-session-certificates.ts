// The short-lived client certificates of an API session (/current-api-session/certificates): signed
// for a CSR whose key the client keeps, valid for 12 hours (as the established controller issues
// them), naming the identity, the session and the certificate in their SPIFFE id. Every read and
// delete is scoped to the caller's API session before anything else, so another session's
// certificate is NOT_FOUND as if it did not exist; they are deleted with their session (the store
// cascades the delete).
import { sql, type SqlBool } from 'kysely';
import { iso } from '../clock.js';
import { notFound } from '../errors.js';
import { newId } from '../ids.js';
import { apiSessionCertificateSpiffeId, fingerprintOfCertificate } from '../pki/index.js';
import type { EntityOf } from '../resources/index.js';
import type { ListQuery } from '../store/repository.js';
import type { ClientCertificateSigner } from './client-certificates.js';
import type { Answer, Resources } from './resources.js';

/** How long an API session certificate is valid. */
export const API_SESSION_CERTIFICATE_LIFETIME_MS = 12 * 3_600_000;

type ApiSessionCertificate = EntityOf<'api-session-certificates'>;

/** The API session a certificate is asked for by, and its identity. */
export interface CertificateSession {
  id: string;
  identityId: string;
}

/** What a create answers: where the certificate is, the certificate with the signing CA, the CAs to trust. */
export interface CreatedApiSessionCertificate {
  id: string;
  _links: Record<string, { href: string }>;
  certificate: string;
  cas: string;
}

function links(id: string): Record<string, { href: string }> {
  return { self: { href: `./current-api-session/certificates/${id}` } };
}

export class ApiSessionCertificates {
  constructor(
    private readonly resources: Resources,
    private readonly signer: ClientCertificateSigner,
  ) {}

  private get service() {
    return this.resources.get('api-session-certificates');
  }

  /** A page of the session's certificates: scoped to the session before any filter. */
  async list(apiSessionId: string, q: Omit<ListQuery, 'scope'>): Promise<{ items: Answer[]; total: number }> {
    const scope = sql<SqlBool>`${sql.ref(`${this.service.repo.table}.api_session_id`)} = ${apiSessionId}`;
    const { items, total } = await this.service.listEntities({ ...q, scope });
    return { items: await this.present(items), total };
  }

  async get(apiSessionId: string, id: string): Promise<Answer> {
    const [answer] = await this.present([await this.own(apiSessionId, id)]);
    return answer!;
  }

  /** Signs a certificate for the CSR's key and keeps it with the session. */
  async create(session: CertificateSession, csrPem: string): Promise<CreatedApiSessionCertificate> {
    const csr = await this.signer.checkCsr(csrPem, 'csr');
    const id = newId();
    const issued = await this.signer.sign(csr, session.identityId, {
      lifetimeMs: API_SESSION_CERTIFICATE_LIFETIME_MS,
      spiffeId: apiSessionCertificateSpiffeId(this.signer.trustDomain, session.identityId, session.id, id),
    });
    await this.resources.write(async (ctx) => {
      // The session ended meanwhile: its certificate has nothing to belong to.
      const live = await ctx.tx.selectFrom('api_sessions').select('id').where('id', '=', session.id).executeTakeFirst();
      if (!live) throw notFound('API session', session.id);
      await ctx.insert('api-session-certificates', {
        id,
        createdAt: ctx.now,
        updatedAt: ctx.now,
        tags: {},
        apiSessionId: session.id,
        subject: issued.cert.subject,
        fingerprint: fingerprintOfCertificate(issued.cert),
        validFrom: iso(Date.parse(issued.cert.validFrom)),
        validTo: iso(Date.parse(issued.cert.validTo)),
        certificate: issued.chainPem,
      });
    });
    return { id, _links: links(id), certificate: issued.chainPem, cas: this.signer.caPem };
  }

  async delete(apiSessionId: string, id: string): Promise<void> {
    const cert = await this.own(apiSessionId, id);
    await this.resources.write(async (ctx) => {
      if (!(await ctx.remove('api-session-certificates', cert.id))) throw notFound('API session certificate', id);
    });
  }

  /** A certificate of this session; another session's is NOT_FOUND. */
  private async own(apiSessionId: string, id: string): Promise<ApiSessionCertificate> {
    const cert = await this.service.repo.get(this.resources.store.db, id);
    if (!cert || cert.apiSessionId !== apiSessionId) throw notFound('API session certificate', id);
    return cert;
  }

  /** As answered: the served path in the links (the certificates are no collection of their own). */
  private async present(entities: readonly ApiSessionCertificate[]): Promise<Answer[]> {
    const answers = await this.service.present(this.resources.store.db, entities);
    for (const answer of answers) answer._links = links(String(answer.id));
    return answers;
  }
}
