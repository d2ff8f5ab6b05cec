import { createClient, type Client } from 'graphql-ws';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { SYSTEM_ACTOR } from '../../../src/domain/actor.js';
import { listeningAtrium } from './support.js';

/**
 * A graphql-ws socket runs every operation as its credentials stand at that moment, as a POST
 * would. An outside walk found the socket acting with what `connection_init` had found for its whole
 * life: an admin demoted to viewer granted the admin role over the socket they had opened before,
 * and a revoked key or an expired token went on creating posts and comments.
 */
type Result = { data?: Record<string, unknown> | null; errors?: Array<{ extensions?: { code?: string } }> };

describe('graphql-ws: credentials checked for every operation', () => {
  const server = listeningAtrium();
  const clients: Client[] = [];
  afterEach(async () => {
    for (const c of clients.splice(0)) await c.dispose();
  });

  /** One socket for the whole test, and how many times it connected (must stay 1). */
  function socket(key: string) {
    let connections = 0;
    const client = createClient({
      url: `${server.base.replace(/^http/, 'ws')}/graphql`,
      webSocketImpl: WebSocket,
      connectionParams: { 'x-api-key': key },
      retryAttempts: 0,
      lazy: false,
      keepAlive: 0,
      on: { connected: () => void (connections += 1) },
    });
    clients.push(client);
    const run = (query: string, variables?: Record<string, unknown>) =>
      new Promise<Result>((resolve) => {
        let result: Result = {};
        client.subscribe(
          { query, variables },
          {
            next: (value) => void (result = value as Result),
            error: (err) => resolve({ errors: err as Result['errors'] }),
            complete: () => resolve(result),
          },
        );
      });
    return { run, connections: () => connections };
  }
  const codes = (r: Result) => (r.errors ?? []).map((e) => e.extensions?.code);
  const SET_ROLE = 'mutation($id: ID!) { updateUser(id: $id, input: { role: ADMIN }) { id role } }';

  it('an admin demoted while connected can no longer grant roles over the same socket', async () => {
    const admin = await server.atrium.caller({ role: 'admin' });
    const target = await server.atrium.caller({ role: 'viewer' });
    const ws = socket(admin.key);
    expect((await ws.run('{ me { role } }')).data).toEqual({ me: { role: 'ADMIN' } });

    await server.atrium.services.core.users.update(SYSTEM_ACTOR, admin.userId, { role: 'viewer' });

    const refused = await ws.run(SET_ROLE, { id: target.userId });
    expect(refused.data ?? null).toBeNull();
    expect(codes(refused)).toEqual(['FORBIDDEN']);
    const stored = await server.atrium.services.core.users.get(target.userId);
    expect(stored.role).toBe('viewer');
    expect((await ws.run('{ me { role } }')).data).toEqual({ me: { role: 'VIEWER' } });
    expect(ws.connections()).toBe(1);
  });

  it('a key revoked while connected is refused for the next operation, UNAUTHENTICATED as over POST', async () => {
    const author = await server.atrium.caller();
    const ws = socket(author.key);
    expect((await ws.run('{ me { id } }')).data).toEqual({ me: { id: author.userId } });

    await server.atrium.services.apiKeys.revoke(author.keyId);

    const refused = await ws.run(
      'mutation($id: ID!) { createPost(input: { title: "After", body: "revoked", authorId: $id }) { post { id } } }',
      { id: author.userId },
    );
    expect(refused.data ?? null).toBeNull();
    expect(codes(refused)).toEqual(['UNAUTHENTICATED']);
    const posts = await server.atrium.services.store.db
      .selectFrom('posts')
      .select('id')
      .where('author_id', '=', author.userId)
      .execute();
    expect(posts).toEqual([]);
    expect(ws.connections()).toBe(1);
  });
});
