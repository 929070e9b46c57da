// The OIDC settings view on its own: the global setting's patterns, then this controller's own once
// its id is known; re-read on a change of a setting or a reset once started, never before.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Kernel } from '../kernel/kernel.js';
import { CONTROLLER_ID_KEY } from '../store/controller-state.js';
import { migrations } from '../store/migrations/index.js';
import { openSqlite } from '../store/sqlite.js';
import { Store } from '../store/store.js';
import { OidcSettingsView } from './settings.js';

let store: Store;
let kernel: Kernel;
const NOW = '2026-01-02T03:04:05.000Z';

async function setting(controllerId: string, redirectUris: string[], postLogoutUris: string[] = []): Promise<void> {
  await kernel.write(async (ctx) => {
    if (await ctx.update('controller-settings', controllerId, { oidc: { redirectUris, postLogoutUris }, updatedAt: NOW })) return;
    await ctx.insert('controller-settings', { id: controllerId, controllerId, createdAt: NOW, updatedAt: NOW, tags: {}, oidc: { redirectUris, postLogoutUris } });
  });
}

beforeAll(async () => {
  store = new Store(openSqlite(':memory:'));
  await store.migrate(migrations);
  kernel = new Kernel({ store, clock: () => Date.parse(NOW) });
  await setting('global', ['https://global.example.com/*'], ['https://global.example.com/bye']);
  await setting('ctrl-a', ['https://own.example.com/*']);
  await setting('ctrl-b', ['https://other.example.com/*']);
});
afterAll(async () => {
  await store.close();
});

describe('OIDC settings view', () => {
  it('holds nothing before it starts, and a reset before the start reads nothing', async () => {
    const view = new OidcSettingsView(kernel);
    await view.reset();
    await view.onChange({ collection: 'controller-settings', kind: 'update', id: 'global' });
    expect(view.patterns).toEqual({ redirectUris: [], postLogoutUris: [] });
  });

  it('reads the global setting alone while this controller has no id', async () => {
    const view = new OidcSettingsView(kernel);
    await view.start();
    expect(view.patterns).toEqual({ redirectUris: ['https://global.example.com/*'], postLogoutUris: ['https://global.example.com/bye'] });
  });

  it('adds the setting of this controller, not of another, and follows changes and resets', async () => {
    await store.db.insertInto('controller_state').values({ key: CONTROLLER_ID_KEY, value: JSON.stringify('ctrl-a'), updated_at: NOW }).execute();
    const view = new OidcSettingsView(kernel);
    await view.start();
    expect(view.patterns.redirectUris).toEqual(['https://global.example.com/*', 'https://own.example.com/*']);

    await setting('ctrl-a', ['https://changed.example.com/*']);
    await view.onChange({ collection: 'identities', kind: 'update', id: 'x' });
    expect(view.patterns.redirectUris).toEqual(['https://global.example.com/*', 'https://own.example.com/*']);
    await view.onChange({ collection: 'controller-settings', kind: 'update', id: 'ctrl-a' });
    expect(view.patterns.redirectUris).toEqual(['https://global.example.com/*', 'https://changed.example.com/*']);

    await setting('global', ['https://reset.example.com/*']);
    await view.reset();
    expect(view.patterns.redirectUris).toEqual(['https://reset.example.com/*', 'https://changed.example.com/*']);

    view.stop();
    await setting('global', ['https://after-stop.example.com/*']);
    await view.reset();
    await view.onChange({ collection: 'controller-settings', kind: 'update', id: 'global' });
    expect(view.patterns.redirectUris).toEqual(['https://reset.example.com/*', 'https://changed.example.com/*']);
  });
});
