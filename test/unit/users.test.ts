import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Actor, SYSTEM_ACTOR } from '../../src/domain/actor.js';
import { RequestUsers } from '../../src/domain/request-users.js';
import { rejection, startCore, type TestCore } from './support/core.js';

describe('UserService', () => {
  let t: TestCore;
  beforeAll(async () => {
    t = await startCore();
  });
  afterAll(async () => {
    await t.stop();
  });

  const events = (type: string) =>
    t.store.db.selectFrom('events').selectAll().where('type', '=', type).orderBy('id').execute();

  describe('create', () => {
    it('normalises handle and email, splits the name, and joins the default organization', async () => {
      const user = await t.core.users.create({
        handle: '  Ada_L ',
        email: 'Ada@Example.COM',
        name: 'Ada King Lovelace',
      });
      expect(user).toMatchObject({
        handle: 'ada_l',
        email: 'ada@example.com',
        firstName: 'Ada',
        lastName: 'King Lovelace',
        name: 'Ada King Lovelace',
        role: 'member',
        emailVerifiedAt: null,
      });
      expect(user.id).toMatch(/^usr_/);
      expect(user.organizationId).toBe(await t.core.organizations.defaultOrganizationId());
      expect(await t.core.users.get(user.id)).toEqual(user);
    });

    it('reports every invalid field at once', async () => {
      const err = await rejection(
        t.core.users.create({
          handle: 'x',
          email: 'not-an-email',
          name: '',
          role: 'owner' as never,
          password: 'short',
        }),
      );
      expect(err.code).toBe('validation_error');
      expect(err.details.map((d) => d.field)).toEqual(['handle', 'email', 'role', 'name', 'password']);
      expect(err.details.find((d) => d.field === 'role')!.code).toBe('invalid_enum');
    });

    it('answers already_exists naming the taken field, case-insensitively', async () => {
      await t.core.users.create({ handle: 'taken', email: 'taken@example.com' });
      const fields = async (handle: string, email: string) => {
        const err = await rejection(t.core.users.create({ handle, email }));
        expect(err.code).toBe('already_exists');
        expect(err.details.every((d) => d.code === 'taken')).toBe(true);
        return { message: err.message, fields: err.details.map((d) => d.field) };
      };
      expect(await fields('TAKEN', 'other@example.com')).toEqual({
        message: 'Another user has this handle.',
        fields: ['handle'],
      });
      expect(await fields('fresh', 'Taken@Example.com')).toEqual({
        message: 'Another user has this email.',
        fields: ['email'],
      });
      expect((await fields('taken', 'taken@example.com')).fields).toEqual(['handle', 'email']);
    });

    it("counts a deleted user's handle and email as taken", async () => {
      const gone = await t.core.users.create({ handle: 'departed', email: 'departed@example.com' });
      await t.core.users.delete(SYSTEM_ACTOR, gone.id);
      const err = await rejection(t.core.users.create({ handle: 'newcomer', email: 'departed@example.com' }));
      expect(err.code).toBe('already_exists');
      expect(err.details.map((d) => d.field)).toEqual(['email']);
    });

    it('refuses an unknown organization as unprocessable', async () => {
      const err = await rejection(
        t.core.users.create({ handle: 'orphan', email: 'orphan@example.com', organizationId: 'org_missing' }),
      );
      expect(err.code).toBe('unprocessable');
      expect(err.details[0]!.code).toBe('unknown_organization');
    });

    it('stores a password hash that authenticates by handle or email', async () => {
      await t.core.users.create({
        handle: 'withpw',
        email: 'withpw@example.com',
        password: 'long enough pw',
      });
      expect((await t.core.users.authenticate('withpw', 'long enough pw'))?.handle).toBe('withpw');
      expect((await t.core.users.authenticate('WithPW@example.com', 'long enough pw'))?.handle).toBe(
        'withpw',
      );
      expect(await t.core.users.authenticate('withpw', 'wrong password')).toBeUndefined();
      expect(await t.core.users.authenticate('nobody', 'long enough pw')).toBeUndefined();
      const found = await t.core.users.findForLogin('withpw');
      expect(found?.passwordHash).toMatch(/^scrypt\$/);
      const viaGet = await t.core.users.get(found!.id);
      expect(viaGet).not.toHaveProperty('passwordHash');
    });
  });

  describe('update rules', () => {
    let self: Actor;
    let someone: Actor;
    let admin: Actor;
    beforeAll(async () => {
      self = (await t.user('member')).actor;
      someone = (await t.user('member')).actor;
      admin = (await t.user('admin')).actor;
    });

    it('lets users change their own name and email', async () => {
      const updated = await t.core.users.update(self, self.id, {
        name: 'New Name',
        email: 'New@Example.com',
      });
      expect(updated).toMatchObject({ firstName: 'New', lastName: 'Name', email: 'new@example.com' });
      expect((await t.core.users.get(self.id)).email).toBe('new@example.com');
    });

    it('forbids changing their own role, and anything of another user', async () => {
      expect((await rejection(t.core.users.update(self, self.id, { role: 'admin' }))).code).toBe('forbidden');
      expect((await rejection(t.core.users.update(self, someone.id, { name: 'Hijack' }))).code).toBe(
        'forbidden',
      );
      expect((await t.core.users.get(self.id)).role).toBe('member');
      expect((await t.core.users.get(someone.id)).name).not.toBe('Hijack');
    });

    it('lets an admin change another user and their role', async () => {
      const updated = await t.core.users.update(admin, someone.id, {
        role: 'viewer',
        name: 'Changed By Admin',
      });
      expect(updated).toMatchObject({ role: 'viewer', name: 'Changed By Admin' });
    });

    it('validates before authorising, and 404s a missing user', async () => {
      expect((await rejection(t.core.users.update(self, self.id, { email: 'bad' }))).code).toBe(
        'validation_error',
      );
      expect(
        (await rejection(t.core.users.update(self, self.id, { name: 'x'.repeat(101) }))).details[0]!.code,
      ).toBe('range_error');
      expect((await rejection(t.core.users.update(admin, 'usr_missing', { name: 'X' }))).code).toBe(
        'not_found',
      );
    });

    it('answers already_exists when the new email belongs to someone else', async () => {
      const other = await t.core.users.get(someone.id);
      const err = await rejection(t.core.users.update(self, self.id, { email: other.email }));
      expect(err.code).toBe('already_exists');
    });
  });

  describe('events and signals', () => {
    it('writes a user.updated outbox row with the change and signals user.changed after commit', async () => {
      const { actor } = await t.user('member');
      const before = t.signals.length;
      // What a listener reads when the signal arrives: it must already see the committed change.
      let seenByListener: Promise<string | undefined> | undefined;
      const off = t.deps.bus.on('user.changed', (s) => {
        seenByListener = t.store.db
          .selectFrom('users')
          .select('first_name')
          .where('id', '=', s.userId)
          .executeTakeFirst()
          .then((r) => r?.first_name ?? undefined);
      });
      try {
        await t.core.users.update(actor, actor.id, { name: 'Signalled Person' });
      } finally {
        off();
      }
      expect(await seenByListener).toBe('Signalled');
      const mine = t.signals.slice(before);
      expect(mine).toContainEqual({ kind: 'user.changed', userId: actor.id });
      const recorded = mine.find((s) => s.kind === 'event.recorded');
      expect(recorded).toMatchObject({ type: 'user.updated' });
      // The domain signal comes after the outbox write it belongs to.
      expect(mine.findIndex((s) => s.kind === 'user.changed')).toBeGreaterThan(mine.indexOf(recorded!));

      const rows = (await events('user.updated')).filter((e) => e.owner_id === actor.id);
      expect(rows).toHaveLength(1);
      const row = rows[0]!;
      expect(row.id).toMatch(/^evt_/);
      expect(row.api_version).toBe('2026-11-28');
      expect(row.dispatched_at).toBeNull();
      expect(row.created).toBe(Math.floor(Date.parse(row.created_at) / 1000));
      expect(JSON.parse(row.data)).toMatchObject({
        object: { id: actor.id, name: 'Signalled Person' },
        changed: ['name'],
      });
    });

    it('leaves no half record and sends no signal when the outbox write fails', async () => {
      const { actor, user } = await t.user('member');
      const eventsBefore = await t.store.db.selectFrom('events').select('id').execute();
      const signalsBefore = t.signals.length;
      // Make the outbox insert fail after the users row has been updated inside the transaction.
      await sql`alter table events rename to events_offline`.execute(t.store.db);
      try {
        await expect(t.core.users.update(actor, actor.id, { name: 'Never Saved' })).rejects.toThrow();
      } finally {
        await sql`alter table events_offline rename to events`.execute(t.store.db);
      }
      expect(await t.core.users.get(actor.id)).toEqual(user);
      expect(await t.store.db.selectFrom('events').select('id').execute()).toEqual(eventsBefore);
      expect(t.signals.length).toBe(signalsBefore);
    });

    it('sends nothing for a refused update', async () => {
      const { actor } = await t.user('member');
      const signalsBefore = t.signals.length;
      await rejection(t.core.users.update(actor, actor.id, { role: 'admin' }));
      expect(t.signals.length).toBe(signalsBefore);
    });
  });

  describe('reading and other changes', () => {
    it('reads many, lists by role with keyset paging, and hides deleted users', async () => {
      const a = await t.user('viewer');
      const b = await t.user('viewer');
      const many = await t.core.users.getMany([a.user.id, b.user.id, 'usr_missing']);
      expect(many.size).toBe(2);
      const viewers = await t.core.users.list({ role: 'viewer', limit: 100 });
      expect(viewers.every((u) => u.role === 'viewer')).toBe(true);
      const firstPage = await t.core.users.list({ role: 'viewer', limit: 1 });
      const next = await t.core.users.list({ role: 'viewer', limit: 100, after: firstPage[0]!.id });
      expect([...firstPage, ...next].map((u) => u.id)).toEqual(viewers.map((u) => u.id));

      const admin = (await t.user('admin')).actor;
      await t.core.users.delete(admin, b.user.id);
      expect((await rejection(t.core.users.get(b.user.id))).code).toBe('not_found');
      expect((await t.core.users.getMany([b.user.id])).size).toBe(0);
      expect((await rejection(t.core.users.update(b.actor, b.user.id, { name: 'Ghost' }))).code).toBe(
        'not_found',
      );
    });

    it('marks an email verified once, for the user themself or an admin only', async () => {
      const { actor } = await t.user('member');
      const stranger = (await t.user('member')).actor;
      expect((await rejection(t.core.users.markEmailVerified(stranger, actor.id))).code).toBe('forbidden');
      const first = await t.core.users.markEmailVerified(actor, actor.id);
      expect(first.emailVerifiedAt).not.toBeNull();
      t.clock.advance(1000);
      const again = await t.core.users.markEmailVerified(actor, actor.id);
      expect(again.emailVerifiedAt).toBe(first.emailVerifiedAt);
    });

    it('sets a password, refusing short ones and unknown users', async () => {
      const { user } = await t.user('member');
      await t.core.users.setPassword(user.id, 'a brand new password');
      expect((await t.core.users.authenticate(user.handle, 'a brand new password'))?.id).toBe(user.id);
      expect((await rejection(t.core.users.setPassword(user.id, 'short'))).code).toBe('validation_error');
      expect((await rejection(t.core.users.setPassword('usr_missing', 'long enough password'))).code).toBe(
        'not_found',
      );
    });
  });

  describe('who may read', () => {
    it('lets a user read their own record and an admin any; others are forbidden, missing users 404', async () => {
      const a = await t.user('member');
      const b = await t.user('member');
      const admin = (await t.user('admin')).actor;
      expect((await t.core.users.read(a.actor, a.user.id)).id).toBe(a.user.id);
      expect((await t.core.users.read(admin, a.user.id)).id).toBe(a.user.id);
      expect((await rejection(t.core.users.read(b.actor, a.user.id))).code).toBe('forbidden');
      expect((await rejection(t.core.users.read(null, a.user.id))).code).toBe('forbidden');
      const client = { id: a.user.id, kind: 'client' as const, role: null };
      expect((await rejection(t.core.users.read(client, a.user.id))).code).toBe('forbidden');
      expect((await rejection(t.core.users.read(admin, 'usr_missing'))).code).toBe('not_found');
    });

    it('answers a user this call has read from RequestUsers, and still asks who may read it', async () => {
      const a = await t.user('member');
      const b = await t.user('member');
      const admin = (await t.user('admin')).actor;
      const seen = new RequestUsers();
      seen.remember(a.user);
      const before = t.store.statementCount();
      expect(await t.core.users.read(a.actor, a.user.id, seen)).toEqual(a.user);
      expect(await t.core.users.read(admin, a.user.id, seen)).toEqual(a.user);
      expect(t.store.statementCount()).toBe(before);
      expect((await rejection(t.core.users.read(b.actor, a.user.id, seen))).code).toBe('forbidden');
      expect((await rejection(t.core.users.read(null, a.user.id, seen))).code).toBe('forbidden');
      // Anyone else is read from the store.
      expect((await t.core.users.read(admin, b.user.id, seen)).id).toBe(b.user.id);
      expect(t.store.statementCount()).toBe(before + 1);
      expect((await rejection(t.core.users.read(admin, 'usr_missing', seen))).code).toBe('not_found');
    });

    it('shows the email only to the user themself or an admin', async () => {
      const a = await t.user('member');
      const b = await t.user('viewer');
      const admin = (await t.user('admin')).actor;
      expect(t.core.users.visibleEmail(a.actor, a.user)).toBe(a.user.email);
      expect(t.core.users.visibleEmail(admin, a.user)).toBe(a.user.email);
      expect(t.core.users.visibleEmail(b.actor, a.user)).toBeNull();
      expect(t.core.users.visibleEmail(null, a.user)).toBeNull();
    });

    it('lets members of an organization and admins read it; others are forbidden', async () => {
      const org = await t.core.organizations.create({ name: 'Analytical Engines' });
      const insider = await t.core.users.create({
        handle: 'insider',
        email: 'insider@example.com',
        organizationId: org.id,
      });
      const insiderActor = { id: insider.id, kind: 'user' as const, role: insider.role };
      const outsider = (await t.user('member')).actor;
      const admin = (await t.user('admin')).actor;
      expect((await t.core.organizations.read(insiderActor, org.id)).name).toBe('Analytical Engines');
      expect((await t.core.organizations.read(admin, org.id)).id).toBe(org.id);
      expect((await rejection(t.core.organizations.read(outsider, org.id))).code).toBe('forbidden');
      expect((await rejection(t.core.organizations.read(null, org.id))).code).toBe('forbidden');
      expect((await rejection(t.core.organizations.read(admin, 'org_missing'))).code).toBe('not_found');
    });
  });

  describe('update policies', () => {
    it('admin-only update: an admin changes anyone; anyone else is forbidden, even for themself', async () => {
      const a = await t.user('member');
      const admin = (await t.user('admin')).actor;
      expect(
        (await rejection(t.core.users.updateAsAdmin(a.actor, a.user.id, { name: 'Self Edit' }))).code,
      ).toBe('forbidden');
      expect((await t.core.users.updateAsAdmin(admin, a.user.id, { role: 'viewer' })).role).toBe('viewer');
      expect((await rejection(t.core.users.updateAsAdmin(admin, 'usr_missing', { name: 'X' }))).code).toBe(
        'not_found',
      );
    });

    it('self-service update: own name and email; role or another user only for admins', async () => {
      const a = await t.user('member');
      const b = await t.user('member');
      const admin = (await t.user('admin')).actor;
      expect((await t.core.users.updateSelfService(a.actor, a.user.id, { name: 'Own Name' })).name).toBe(
        'Own Name',
      );
      expect(
        (await rejection(t.core.users.updateSelfService(a.actor, a.user.id, { role: 'member' }))).code,
      ).toBe('forbidden');
      expect(
        (await rejection(t.core.users.updateSelfService(a.actor, b.user.id, { name: 'X Y' }))).code,
      ).toBe('forbidden');
      const client = { id: 'cli_x', kind: 'client' as const, role: null };
      expect((await rejection(t.core.users.updateSelfService(client, a.user.id, { name: 'X Y' }))).code).toBe(
        'forbidden',
      );
      expect((await t.core.users.updateSelfService(admin, b.user.id, { role: 'viewer' })).role).toBe(
        'viewer',
      );
      await t.core.users.delete(admin, b.user.id);
      expect((await rejection(t.core.users.updateSelfService(admin, b.user.id, { name: 'Z' }))).code).toBe(
        'not_found',
      );
    });

    it('writes no event, sends no signal and keeps updated_at for a change that alters nothing', async () => {
      const { user, actor } = await t.user('member');
      const eventsBefore = (await events('user.updated')).length;
      const signalsBefore = t.signals.length;
      t.clock.advance(1000);
      for (const input of [
        {},
        { name: user.name },
        { email: user.email.toUpperCase(), name: ` ${user.name} ` },
      ]) {
        expect(await t.core.users.updateSelfService(actor, user.id, input)).toEqual(user);
      }
      expect((await events('user.updated')).length).toBe(eventsBefore);
      expect(t.signals.length).toBe(signalsBefore);
      expect(await t.core.users.get(user.id)).toEqual(user);

      await t.core.users.updateSelfService(actor, user.id, { name: user.name, email: 'changed@example.com' });
      const last = (await events('user.updated')).at(-1)!;
      expect(JSON.parse(last.data).changed).toEqual(['email']);
    });

    it('refuses a blank or whitespace-only name with a field detail, on create and update', async () => {
      const { actor, user } = await t.user('member');
      for (const name of ['', ' ', '   ', '\t \n']) {
        const err = await rejection(t.core.users.updateSelfService(actor, user.id, { name }));
        expect(err.code).toBe('validation_error');
        expect(err.details.map((d) => d.field)).toEqual(['name']);
        const created = await rejection(
          t.core.users.create({ handle: 'blanky', email: 'blanky@example.com', name }),
        );
        expect(created.details.map((d) => d.field)).toEqual(['name']);
      }
      const err = await rejection(t.core.users.updateSelfService(actor, user.id, { firstName: '  ' }));
      expect(err.details.map((d) => d.field)).toEqual(['firstName']);
      expect(await t.core.users.get(user.id)).toEqual(user);
    });
  });

  describe('delete and paging', () => {
    it('soft-deletes for admins only; a deleted user is gone from every read and cannot log in', async () => {
      const created = await t.core.users.create({
        handle: 'doomed',
        email: 'doomed@example.com',
        password: 'long enough pw',
      });
      const self = { id: created.id, kind: 'user' as const, role: created.role };
      const admin = (await t.user('admin')).actor;
      expect((await rejection(t.core.users.delete(self, created.id))).code).toBe('forbidden');
      const signalsBefore = t.signals.length;
      const result = await t.core.users.delete(admin, created.id);
      expect(result).toEqual({ id: created.id, deletedAt: t.clock.now().toISOString() });
      expect(t.signals.slice(signalsBefore)).toEqual([{ kind: 'user.changed', userId: created.id }]);
      expect((await rejection(t.core.users.get(created.id))).code).toBe('not_found');
      expect((await rejection(t.core.users.read(admin, created.id))).code).toBe('not_found');
      expect(await t.core.users.authenticate('doomed', 'long enough pw')).toBeUndefined();
      expect((await t.core.users.list({ limit: 1000 })).map((u) => u.id)).not.toContain(created.id);
      expect((await rejection(t.core.users.delete(admin, created.id))).code).toBe('not_found');
      expect((await rejection(t.core.users.delete(admin, 'usr_missing'))).code).toBe('not_found');
    });

    it('pages users by id after an id, by role, refusing bad limits', async () => {
      await t.user('viewer');
      await t.user('viewer');
      const all = await t.core.users.list({ role: 'viewer', limit: 1000 });
      const seen: string[] = [];
      let cursor: string | undefined;
      for (;;) {
        const page = await t.core.users.page(SYSTEM_ACTOR, { role: 'viewer', cursor, limit: 1 });
        if (page.length === 0) break;
        seen.push(...page.map((u) => u.id));
        cursor = page.at(-1)!.id;
      }
      expect(seen).toEqual(all.map((u) => u.id));
      expect([...seen].sort()).toEqual(seen);
      for (const limit of [0, -1, 1.5, 1001]) {
        expect((await rejection(t.core.users.page(SYSTEM_ACTOR, { limit }))).details[0]!.field).toBe('limit');
      }
      expect(
        (await rejection(t.core.users.page(SYSTEM_ACTOR, { limit: 5, role: 'owner' as never }))).details[0]!
          .field,
      ).toBe('role');
      const badCursor = await rejection(t.core.users.page(SYSTEM_ACTOR, { limit: 5, cursor: 'garbage' }));
      expect(badCursor.details).toEqual([
        { field: 'cursor', message: expect.any(String), code: 'invalid_cursor' },
      ]);
      // The rule is the core's: an anonymous caller may not list users, whatever surface asks.
      expect((await rejection(t.core.users.page(null, { limit: 5 }))).code).toBe('unauthenticated');
    });
  });
});
