import { randomBytes } from 'node:crypto';
import { expect } from 'vitest';
import type { Actor } from '../../../src/domain/actor.js';
import type { Clock } from '../../../src/domain/clock.js';
import type { CoreDeps } from '../../../src/domain/context.js';
import { type Core, createCore } from '../../../src/domain/core.js';
import { CursorCodec } from '../../../src/domain/cursor.js';
import { DomainError } from '../../../src/domain/errors.js';
import type { User } from '../../../src/domain/users.js';
import { DomainBus, type DomainSignal } from '../../../src/events/bus.js';
import { openStore, type Store } from '../../../src/store/store.js';
import type { Role } from '../../../src/store/types.js';
import { freshDatabase, type TestDatabase } from '../../helpers/database.js';

/** A clock the test moves by hand, so timestamps and ids are predictable. */
export class ManualClock implements Clock {
  constructor(private current = Date.parse('2026-01-01T00:00:00.000Z')) {}
  now(): Date {
    return new Date(this.current);
  }
  advance(ms = 1): void {
    this.current += ms;
  }
}

export interface TestCore {
  core: Core;
  deps: CoreDeps;
  store: Store;
  database: TestDatabase;
  clock: ManualClock;
  /** Every signal the bus sent, in order. */
  signals: DomainSignal[];
  user(role?: Role, handle?: string): Promise<{ user: User; actor: Actor }>;
  stop(): Promise<void>;
}

let counter = 0;

/**
 * The domain core on a fresh, migrated database (SQLite in memory, or a new PostgreSQL database
 * when TEST_DATABASE_URL is set), without any surface in front of it.
 */
export async function startCore(): Promise<TestCore> {
  const database = await freshDatabase();
  const store = openStore(database.url, { poolSize: 4 });
  await store.migrate();
  const clock = new ManualClock();
  const bus = new DomainBus();
  const signals: DomainSignal[] = [];
  for (const kind of [
    'user.changed',
    'order.changed',
    'post.changed',
    'comment.added',
    'event.recorded',
  ] as const) {
    bus.on(kind, (s) => signals.push(s));
  }
  const deps: CoreDeps = { store, clock, bus, cursors: new CursorCodec(randomBytes(32)) };
  const core = createCore(deps);
  return {
    core,
    deps,
    store,
    database,
    clock,
    signals,
    async user(role = 'member', handle) {
      counter += 1;
      const h = handle ?? `u${counter}x${randomBytes(3).toString('hex')}`;
      const user = await core.users.create({ handle: h, email: `${h}@example.com`, name: `Test ${h}`, role });
      return { user, actor: { id: user.id, kind: 'user', role } };
    },
    async stop() {
      await store.close();
      await database.drop();
    },
  };
}

/** The DomainError a promise rejects with; anything else (or no rejection) fails the test. */
export async function rejection(p: Promise<unknown>): Promise<DomainError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(DomainError);
  return err as DomainError;
}
