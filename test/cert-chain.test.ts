// Path validation of client certificates (src/pki/chain.ts), without TLS: which presented
// certificates link a leaf to an anchor, and which never do (a certificate that is not a CA, a
// forged issuer name, an expired CA), whatever their order.
import { X509Certificate } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { MAX_DEPTH, verifyChain, type TrustAnchor } from '../src/pki/chain.js';
import { testCa, testCertificate, type TestCertificate } from './helpers.js';

const DAY = 86_400_000;
const node = (c: TestCertificate) => new X509Certificate(c.certPem);
const anchor = (c: TestCertificate, tag = 'root'): TrustAnchor<string> => ({ cert: node(c), tag });

describe('verifyChain', () => {
  it('links a leaf through presented CAs in any order, ignoring others, and names the anchor and the path', async () => {
    const root = await testCa('chain root');
    const mid = await testCa('chain mid', { issuer: root });
    const low = await testCa('chain low', { issuer: mid });
    const leaf = await testCertificate('chain leaf', { issuer: low });
    const junk = await testCa('unrelated');
    const found = verifyChain(node(leaf), [node(junk), node(mid), node(low)], [anchor(root)], Date.now());
    expect(found?.anchor.tag).toBe('root');
    expect(found?.intermediates.map((c) => c.subject)).toEqual(['CN=chain low', 'CN=chain mid']);
    // Without a link the path breaks; with it as an anchor, the path is shorter.
    expect(verifyChain(node(leaf), [node(mid)], [anchor(root)], Date.now())).toBeUndefined();
    expect(verifyChain(node(leaf), [], [anchor(root), anchor(low, 'low')], Date.now())?.anchor.tag).toBe('low');
  });

  // An attack that worked: the holder of an intermediate allowed no CA below it minted one, whose
  // certificates enrolled and logged in.
  it('every CA of the path, the anchor included, allows the CAs below it (pathLenConstraint)', async () => {
    const root = await testCa('pathlen root');
    const none = await testCa('pathlen 0', { issuer: root, pathLength: 0 });
    const minted = await testCa('minted below 0', { issuer: none });
    const deep = await testCertificate('deep leaf', { issuer: minted });
    const direct = await testCertificate('direct leaf', { issuer: none });
    expect(verifyChain(node(deep), [node(minted), node(none)], [anchor(root)], Date.now())).toBeUndefined();
    expect(verifyChain(node(direct), [node(none)], [anchor(root)], Date.now())?.intermediates.map((c) => c.subject)).toEqual(['CN=pathlen 0']);
    // One CA allowed below: one passes, two do not; an anchor's own constraint counts too.
    const one = await testCa('pathlen 1', { issuer: root, pathLength: 1 });
    const a = await testCa('below 1 a', { issuer: one });
    const b = await testCa('below 1 b', { issuer: a });
    expect(verifyChain(node(await testCertificate('leaf a', { issuer: a })), [node(a), node(one)], [anchor(root)], Date.now())).toBeDefined();
    expect(verifyChain(node(await testCertificate('leaf b', { issuer: b })), [node(b), node(a), node(one)], [anchor(root)], Date.now())).toBeUndefined();
    const tight = await testCa('anchor pathlen 0', { pathLength: 0 });
    const under = await testCa('under tight anchor', { issuer: tight });
    expect(verifyChain(node(await testCertificate('leaf t', { issuer: under })), [node(under)], [anchor(tight)], Date.now())).toBeUndefined();
    expect(verifyChain(node(await testCertificate('leaf t2', { issuer: tight })), [], [anchor(tight)], Date.now())).toBeDefined();
  });

  it('a certificate that is not a CA links nothing, though its key signed the leaf', async () => {
    const root = await testCa('non-ca root');
    const notCa = await testCertificate('not a CA', { issuer: root });
    const leaf = await testCertificate('signed by a leaf', { issuer: { cert: notCa.cert, privateKey: notCa.privateKey, certPem: notCa.certPem } });
    expect(verifyChain(node(leaf), [node(notCa)], [anchor(root)], Date.now())).toBeUndefined();
  });

  it('a leaf naming an anchor as its issuer but signed by another key is refused', async () => {
    const root = await testCa('forged root');
    const rogue = await testCa('rogue');
    const forged = await testCertificate('forged', { issuer: rogue, issuerName: root.cert.subject });
    expect(verifyChain(node(forged), [node(root), node(rogue)], [anchor(root)], Date.now())).toBeUndefined();
  });

  it('a CA outside its validity links nothing; the leaf’s own validity is left to the auth policy', async () => {
    const now = Date.now();
    const root = await testCa('validity root', { notBefore: new Date(now - 30 * DAY) });
    const expiredMid = await testCa('expired mid', { issuer: root, notBefore: new Date(now - 10 * DAY), notAfter: new Date(now - DAY) });
    const leaf = await testCertificate('under expired', { issuer: expiredMid });
    expect(verifyChain(node(leaf), [node(expiredMid)], [anchor(root)], now)).toBeUndefined();
    expect(verifyChain(node(leaf), [node(expiredMid)], [anchor(root)], now - 2 * DAY)).toBeDefined();
    const expiredLeaf = await testCertificate('expired leaf', { issuer: root, notBefore: new Date(now - 10 * DAY), notAfter: new Date(now - DAY) });
    expect(verifyChain(node(expiredLeaf), [], [anchor(root)], now)).toBeDefined();
  });

  it(`follows at most ${MAX_DEPTH} links`, async () => {
    const root = await testCa('deep root');
    const cas: TestCertificate[] = [];
    let issuer = root;
    for (let i = 0; i <= MAX_DEPTH; i++) {
      issuer = await testCa(`deep ${i}`, { issuer });
      cas.push(issuer);
    }
    const leaf = await testCertificate('deep leaf', { issuer });
    expect(verifyChain(node(leaf), cas.map(node), [anchor(root)], Date.now())).toBeUndefined();
    expect(verifyChain(node(leaf), cas.slice(1).map(node), [anchor(cas[0]!)], Date.now())).toBeDefined();
  });
});
