import { byIds } from './batch.js';
import { iso } from './clock.js';
import type { CoreDeps } from './context.js';
import { isAdmin } from './actor.js';
import { forbidden, notFound, Problems } from './errors.js';
import { mayReadOrganization, type Viewer } from './user-policies.js';
import { isId, newId } from './ids.js';
import { checkText } from './validate.js';

export interface Organization {
  id: string;
  name: string;
  createdAt: string;
  updatedAt: string;
}

const DEFAULT_ORG_SETTING = 'default_organization_id';

export class OrganizationService {
  constructor(private readonly deps: CoreDeps) {}

  async create(input: { name: string }): Promise<Organization> {
    const problems = new Problems();
    const bad = checkText(input.name, 1, 200);
    if (bad) problems.add('name', `name ${bad}`, 'invalid');
    problems.throwIfAny();
    const now = this.deps.clock.now();
    const org = {
      id: newId('org', now.getTime()),
      name: input.name.trim(),
      created_at: iso(now),
      updated_at: iso(now),
    };
    await this.deps.store.db.insertInto('organizations').values(org).execute();
    return toOrganization(org);
  }

  async get(id: string): Promise<Organization> {
    // Not an organization id: none, on every engine alike, and not echoed (see posts' assertPostId).
    if (!isId(id, 'org')) throw notFound('Organization');
    const row = await this.deps.store.db
      .selectFrom('organizations')
      .selectAll()
      .where('id', '=', id)
      .executeTakeFirst();
    if (!row) throw notFound('Organization', id);
    return toOrganization(row);
  }

  /** An organization for `viewer`: its members or an admin (forbidden otherwise); unknown: not_found. */
  async read(viewer: Viewer, id: string): Promise<Organization> {
    const org = await this.get(id);
    let own: string | null = null;
    if (viewer !== null && viewer.kind === 'user' && !isAdmin(viewer)) {
      const member = await this.deps.store.db
        .selectFrom('users')
        .select('organization_id')
        .where('id', '=', viewer.id)
        .where('deleted_at', 'is', null)
        .executeTakeFirst();
      own = member?.organization_id ?? null;
    }
    if (!mayReadOrganization(viewer, own, org.id))
      throw forbidden('You may read only your own organization.');
    return org;
  }

  getMany(ids: readonly string[]): Promise<Map<string, Organization>> {
    const db = this.deps.store.db;
    return byIds(
      ids,
      'org',
      (unique) => db.selectFrom('organizations').selectAll().where('id', 'in', unique).execute(),
      toOrganization,
    );
  }

  /** The organization users join when none is named; made on first use. */
  async defaultOrganizationId(): Promise<string> {
    const db = this.deps.store.db;
    const found = await db
      .selectFrom('settings')
      .select('value')
      .where('key', '=', DEFAULT_ORG_SETTING)
      .executeTakeFirst();
    if (found) return found.value;
    const org = await this.create({ name: 'Default organization' });
    await db
      .insertInto('settings')
      .values({ key: DEFAULT_ORG_SETTING, value: org.id })
      .onConflict((oc) => oc.column('key').doNothing())
      .execute();
    const winner = await db
      .selectFrom('settings')
      .select('value')
      .where('key', '=', DEFAULT_ORG_SETTING)
      .executeTakeFirstOrThrow();
    if (winner.value !== org.id) await db.deleteFrom('organizations').where('id', '=', org.id).execute();
    return winner.value;
  }
}

function toOrganization(row: {
  id: string;
  name: string;
  created_at: string;
  updated_at: string;
}): Organization {
  return { id: row.id, name: row.name, createdAt: row.created_at, updatedAt: row.updated_at };
}
