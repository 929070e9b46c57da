// Certificate trust on its own: where a presented chain leads (the network's root, its signing CA
// supplied by the controller, a verified CA), and how the CAs read from the store are kept — once
// per change of a CA, a failed read not kept, a read outrun by a change not kept either.
import { X509Certificate } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { testCa, testCertificate, type TestCertificate } from '../../test/helpers.js';
import type { Repository } from '../store/repository.js';
import type { Store } from '../store/store.js';
import type { EntityOf } from '../resources/index.js';
import { CertificateTrust } from './cert-trust.js';

type Ca = EntityOf<'cas'>;

const x509 = (c: TestCertificate): X509Certificate => new X509Certificate(c.certPem);

function ca(id: string, certPem: string, o: Partial<Ca> = {}): Ca {
  return { id, certPem, isVerified: true, isAuthEnabled: true, externalIdClaim: null, ...o } as Ca;
}

/** A repository of CAs whose reads are counted, and answered by `read` (which may throw or wait). */
function casReadBy(read: () => Promise<Ca[]>): { repo: Repository<Ca>; reads: () => number } {
  let reads = 0;
  const repo = {
    list: async () => {
      reads++;
      const items = await read();
      return { items, total: items.length };
    },
  } as unknown as Repository<Ca>;
  return { repo, reads: () => reads };
}

const store = { db: {} } as unknown as Store;

async function network(): Promise<{ root: TestCertificate; signing: TestCertificate; anchors: { rootCertPem: string; signingCertPem: string } }> {
  const root = await testCa('network root');
  const signing = await testCa('network signing', { issuer: root });
  return { root, signing, anchors: { rootCertPem: root.certPem, signingCertPem: signing.certPem } };
}

describe('certificate trust', () => {
  it('places a network certificate by whether the client sent its signing CA', async () => {
    const { signing, anchors } = await network();
    const trust = new CertificateTrust(store, casReadBy(async () => []).repo, Date.now, anchors);
    const leaf = x509(await testCertificate('device', { issuer: signing }));
    expect(await trust.verify(leaf, [x509(signing)])).toEqual({ kind: 'network', improperClientCertChain: false, resolvedToRoot: true });
    expect(await trust.verify(leaf, [])).toEqual({ kind: 'network', improperClientCertChain: true, resolvedToRoot: true });
  });

  it('places a certificate of a verified CA with the CA, and one of nothing trusted nowhere', async () => {
    const { anchors } = await network();
    const root = await testCa('third-party root');
    // Names itself as issuer but is signed by another key: not a root, however it is named.
    const other = await testCa('someone else');
    const selfNamed = await testCa('self named', { issuer: other, issuerName: 'CN=self named' });
    const cas = [ca('ca-root', root.certPem, { externalIdClaim: { location: 'SAN_URI' } as Ca['externalIdClaim'] }), ca('ca-broken', 'not a certificate'), ca('ca-named', selfNamed.certPem)];
    const trust = new CertificateTrust(store, casReadBy(async () => cas).repo, Date.now, anchors);
    expect(await trust.verify(x509(await testCertificate('user', { issuer: root })), [])).toEqual({
      kind: 'ca',
      caId: 'ca-root',
      externalIdClaim: { location: 'SAN_URI' },
      adminWritten: true,
      improperClientCertChain: false,
      resolvedToRoot: true,
    });
    expect(await trust.verify(x509(await testCertificate('user', { issuer: selfNamed })), [])).toMatchObject({ caId: 'ca-named', resolvedToRoot: false });
    // A CA a delegate wrote last says so (the login refuses it for privileged identities).
    const written = new CertificateTrust(store, casReadBy(async () => [ca('ca-delegate', root.certPem, { adminWritten: false })]).repo, Date.now, anchors);
    expect(await written.verify(x509(await testCertificate('user', { issuer: root })), [])).toMatchObject({ caId: 'ca-delegate', adminWritten: false });
    expect(await trust.verify(x509(await testCertificate('stranger')), [])).toBeUndefined();
  });

  it('trusts no CA that is unverified or not enabled for authentication', async () => {
    const { anchors } = await network();
    const unverified = await testCa('unverified');
    const disabled = await testCa('disabled');
    const cas = [ca('u', unverified.certPem, { isVerified: false }), ca('d', disabled.certPem, { isAuthEnabled: false })];
    const trust = new CertificateTrust(store, casReadBy(async () => cas).repo, Date.now, anchors);
    expect(await trust.verify(x509(await testCertificate('a', { issuer: unverified })), [])).toBeUndefined();
    expect(await trust.verify(x509(await testCertificate('b', { issuer: disabled })), [])).toBeUndefined();
  });

  it('reads the CAs once, again after a change of a CA only, and again after a failed read', async () => {
    const { anchors } = await network();
    const stranger = x509(await testCertificate('stranger'));
    let fail = false;
    const { repo, reads } = casReadBy(async () => {
      if (fail) throw new Error('store unavailable');
      return [];
    });
    const trust = new CertificateTrust(store, repo, Date.now, anchors);
    await trust.verify(stranger, []);
    await trust.verify(stranger, []);
    expect(reads()).toBe(1);
    trust.onChange({ collection: 'identities', kind: 'update', id: 'x' });
    await trust.verify(stranger, []);
    expect(reads()).toBe(1);
    trust.onChange({ collection: 'cas', kind: 'update', id: 'x' });
    fail = true;
    await expect(trust.verify(stranger, [])).rejects.toThrow('store unavailable');
    fail = false;
    await trust.verify(stranger, []);
    await trust.verify(stranger, []);
    expect(reads()).toBe(3);
  });

  it('keeps a read started after a change even when the read it replaced fails later', async () => {
    const { anchors } = await network();
    const stranger = x509(await testCertificate('stranger'));
    let failFirst!: (err: Error) => void;
    const first = new Promise<Ca[]>((_, reject) => (failFirst = reject));
    const answers = [first, Promise.resolve([])];
    const { repo, reads } = casReadBy(() => answers.shift() ?? Promise.resolve([]));
    const trust = new CertificateTrust(store, repo, Date.now, anchors);
    const outrun = trust.verify(stranger, []);
    trust.onChange({ collection: 'cas', kind: 'create', id: 'new' });
    await trust.verify(stranger, []);
    failFirst(new Error('slow read failed'));
    await expect(outrun).rejects.toThrow('slow read failed');
    await trust.verify(stranger, []);
    expect(reads()).toBe(2);
  });

  it('refuses network anchors without a certificate', () => {
    expect(() => new CertificateTrust(store, casReadBy(async () => []).repo, Date.now, { rootCertPem: '', signingCertPem: '' })).toThrow(
      'the network PKI has no certificate',
    );
  });
});
