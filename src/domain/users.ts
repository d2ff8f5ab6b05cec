import type { Transaction } from 'kysely';
import type { Dialect } from '../store/dialect.js';
import { fixedQuery } from '../store/fixed-query.js';
import type { Db } from '../store/store.js';
import type { Database, Role, UserRow } from '../store/types.js';
import { isUniqueViolation, isForeignKeyViolation } from '../store/errors.js';
import type { Actor } from './actor.js';
import { isAdmin } from './actor.js';
import { byIds } from './batch.js';
import { iso } from './clock.js';
import type { CoreDeps, Tx } from './context.js';
import { inGivenTransaction, inTransaction } from './context.js';
import { DomainError, forbidden, notFound, Problems } from './errors.js';
import { isId, newId } from './ids.js';
import type { RequestUsers } from './request-users.js';
import type { OrganizationService } from './organizations.js';
import { hashPassword, verifyPassword } from './passwords.js';
import {
  assertMayListUsers,
  ADMIN_ONLY_UPDATE,
  assertMayDeleteUser,
  assertMayReadUser,
  mayReadOrganization,
  mayViewEmail,
  SELF_SERVICE_UPDATE,
  type UserField,
  type UserUpdatePolicy,
  type Viewer,
} from './user-policies.js';
import { checkEmail, checkText, HANDLE, isBlank, joinName, normaliseEmail, splitName } from './validate.js';

export const ROLES: readonly Role[] = ['admin', 'member', 'viewer'];
/** The most users one `page` call returns. */
export const MAX_USERS_PAGE = 1000;
/** How many users a page holds when the caller does not say (GraphQL's `Query.users`). */
export const USERS_PAGE_SIZE = 20;

/** The columns each update field writes, to report which fields a change really altered. */
const FIELD_COLUMNS: Record<UserField, readonly (keyof UserRow)[]> = {
  name: ['first_name', 'last_name'],
  firstName: ['first_name'],
  lastName: ['last_name'],
  email: ['email'],
  role: ['role'],
};

/** A name part: 1 to 100 characters, not blank. Returns the message, or null when fine. */
export function checkName(value: unknown, field: string): string | null {
  const bad = checkText(value, 1, 100);
  if (bad) return `${field} ${bad}`;
  if (isBlank(value as string)) return `${field} must not be blank`;
  return null;
}

export interface User {
  id: string;
  organizationId: string;
  handle: string;
  email: string;
  firstName: string | null;
  lastName: string | null;
  name: string;
  role: Role;
  emailVerifiedAt: string | null;
  createdAt: string;
  updatedAt: string;
}

export interface CreateUserInput {
  handle: string;
  email: string;
  name?: string | undefined;
  firstName?: string | null | undefined;
  lastName?: string | null | undefined;
  role?: Role | undefined;
  organizationId?: string | undefined;
  password?: string | undefined;
}

export interface UpdateUserInput {
  name?: string | undefined;
  firstName?: string | null | undefined;
  lastName?: string | null | undefined;
  email?: string | undefined;
  role?: Role | undefined;
}

export interface PageQuery {
  role?: Role | undefined;
  /** The id of the last user received; absent (or null) for the first page. */
  cursor?: string | null | undefined;
  limit: number;
}

export interface ListUsersQuery {
  role?: Role | undefined;
  organizationId?: string | undefined;
  limit: number;
  after?: string | undefined;
}

export class UserService {
  constructor(
    private readonly deps: CoreDeps,
    private readonly organizations: OrganizationService,
  ) {}

  async create(input: CreateUserInput): Promise<User> {
    const problems = new Problems();
    const handle = typeof input.handle === 'string' ? input.handle.trim().toLowerCase() : '';
    if (!HANDLE.test(handle)) {
      problems.add(
        'handle',
        'handle must be 3 to 39 characters: letters, digits, "_" or "-", starting with a letter or digit',
      );
    }
    const emailProblem = checkEmail(input.email);
    if (emailProblem) problems.add('email', `email ${emailProblem}`, 'invalid_format');
    const role = input.role ?? 'member';
    if (!ROLES.includes(role))
      problems.add('role', 'role must be one of admin, member, viewer', 'invalid_enum');
    let names = { firstName: input.firstName ?? null, lastName: input.lastName ?? null };
    if (input.name !== undefined) {
      const bad = checkName(input.name, 'name');
      if (bad) problems.add('name', bad);
      else names = splitName(input.name);
    }
    if (
      input.password !== undefined &&
      (typeof input.password !== 'string' || input.password.length < 8 || input.password.length > 1024)
    ) {
      problems.add('password', 'password must be 8 to 1024 characters', 'range_error');
    }
    problems.throwIfAny();

    const organizationId = input.organizationId ?? (await this.organizations.defaultOrganizationId());
    const passwordHash = input.password === undefined ? null : await hashPassword(input.password);
    const now = this.deps.clock.now();
    const row: UserRow = {
      id: newId('usr', now.getTime()),
      organization_id: organizationId,
      handle,
      email: normaliseEmail(input.email),
      first_name: names.firstName,
      last_name: names.lastName,
      role,
      password_hash: passwordHash,
      email_verified_at: null,
      created_at: iso(now),
      updated_at: iso(now),
      deleted_at: null,
    };
    try {
      await this.deps.store.db.insertInto('users').values(row).execute();
    } catch (err) {
      if (isUniqueViolation(err)) throw await this.takenError(row.handle, row.email);
      if (isForeignKeyViolation(err)) {
        throw new DomainError('unprocessable', 'The organization does not exist.', [
          { field: 'organizationId', message: 'unknown organization', code: 'unknown_organization' },
        ]);
      }
      throw err;
    }
    return toUser(row);
  }

  /**
   * Which of handle and email another user holds, so the caller learns what to change. Deleted users
   * keep theirs (the unique index covers them), so they count. Between the failed insert and this
   * read the holder may have changed; the error then names both, as neither could be told apart.
   */
  private async takenError(handle: string, email: string): Promise<DomainError> {
    const holders = await this.deps.store.db
      .selectFrom('users')
      .select(['handle', 'email'])
      .where((eb) => eb.or([eb('handle', '=', handle), eb('email', '=', email)]))
      .execute();
    const taken: ('handle' | 'email')[] = [];
    if (holders.some((h) => h.handle === handle)) taken.push('handle');
    if (holders.some((h) => h.email === email)) taken.push('email');
    if (taken.length === 0) taken.push('handle', 'email');
    return new DomainError(
      'already_exists',
      `Another user has this ${taken.join(' and ')}.`,
      taken.map((field) => ({ field, message: `${field} is taken`, code: 'taken' })),
    );
  }

  /**
   * A live user, or not_found (deleted users are not found). `seen` holds users this call has
   * already read (its caller, by authentication): one of them is answered without a second read.
   */
  async get(id: string, seen?: RequestUsers | null): Promise<User> {
    return seen?.known(id) ?? toUser(await liveUser(this.deps.store.db, this.deps.store.dialect, id));
  }

  /** Batch read for data loaders; missing ids are absent from the map. */
  getMany(ids: readonly string[]): Promise<Map<string, User>> {
    const db = this.deps.store.db;
    return byIds(ids, 'usr', (unique) => liveUsers(db).where('id', 'in', unique).execute(), toUser);
  }

  /** Users by id ascending, keyset-paged after an id; filters by role and organization. */
  async list(query: ListUsersQuery): Promise<User[]> {
    let q = liveUsers(this.deps.store.db);
    if (query.role) q = q.where('role', '=', query.role);
    if (query.organizationId) q = q.where('organization_id', '=', query.organizationId);
    if (query.after) q = q.where('id', '>', query.after);
    const rows = await q.orderBy('id', 'asc').limit(query.limit).execute();
    return rows.map(toUser);
  }

  /** Finds a user for login by handle or email. */
  async findForLogin(login: string): Promise<(User & { passwordHash: string | null }) | undefined> {
    const value = normaliseEmail(login);
    const row = await liveUsers(this.deps.store.db)
      .where((eb) => eb.or([eb('handle', '=', value), eb('email', '=', value)]))
      .executeTakeFirst();
    return row ? { ...toUser(row), passwordHash: row.password_hash } : undefined;
  }

  /** Checks a login; always spends one password hash so timing does not reveal which part failed. */
  async authenticate(login: string, password: string): Promise<User | undefined> {
    const found = await this.findForLogin(login);
    const ok = await verifyPassword(password, found?.passwordHash);
    return ok && found ? stripHash(found) : undefined;
  }

  /**
   * The whole record for `viewer`: the user themself or an admin (forbidden); unknown or deleted:
   * not_found. `seen` holds users this call has already read (its caller, by authentication).
   */
  async read(viewer: Viewer, id: string, seen?: RequestUsers): Promise<User> {
    const user = await this.get(id, seen);
    assertMayReadUser(viewer, id);
    return user;
  }

  /** The email as `viewer` may see it (the user themself or an admin), else null. */
  visibleEmail(viewer: Viewer, user: User): string | null {
    return mayViewEmail(viewer, user) ? user.email : null;
  }

  /** The viewer's own organization (a user's), as mayReadOrganization takes it; null for a client. */
  async organizationOf(viewer: Viewer, seen?: RequestUsers | null): Promise<string | null> {
    return viewer?.kind === 'user' ? (await this.get(viewer.id, seen)).organizationId : null;
  }

  /** `user`'s organization id as `viewer` may see it (D19: its members or an admin), else null. */
  visibleOrganizationId(viewer: Viewer, viewerOrganizationId: string | null, user: User): string | null {
    return mayReadOrganization(viewer, viewerOrganizationId, user.organizationId)
      ? user.organizationId
      : null;
  }

  /** REST `PATCH /v1/users/{id}`: admins only. */
  updateAsAdmin(actor: Actor, id: string, input: UpdateUserInput): Promise<User> {
    return this.update(actor, id, input, ADMIN_ONLY_UPDATE);
  }

  /**
   * GraphQL `updateUser`, gRPC `UpdateUser`: a user changes their own name and email; only an admin
   * changes a role or another user.
   */
  updateSelfService(actor: Actor, id: string, input: UpdateUserInput): Promise<User> {
    return this.update(actor, id, input, SELF_SERVICE_UPDATE);
  }

  /**
   * The field problems `update` would refuse `input` for, added to `problems`: for a surface that
   * checks fields of its own (gRPC's `user_id` and `update_mask`) and reports every problem at once.
   */
  updateProblems(input: UpdateUserInput, problems = new Problems()): Problems {
    problems.details.push(...checkUpdate(input).problems.details);
    return problems;
  }

  /**
   * Validates, then asks `policy`, then writes. Fields are present when not undefined. A change that
   * alters nothing writes nothing: no `updated_at`, no outbox event, no signal.
   */
  async update(
    actor: Actor,
    id: string,
    input: UpdateUserInput,
    policy: UserUpdatePolicy = SELF_SERVICE_UPDATE,
  ): Promise<User> {
    const { problems, patch, fields } = checkUpdate(input);
    problems.throwIfAny();
    policy.assertMayUpdate(actor, id, fields);

    return inTransaction(this.deps, async (tx) => {
      // Locked: the response and the event are built from this row, so a concurrent update or
      // delete must wait for this one (or this one for it) instead of being written over unseen.
      const current = await liveUser(tx.db, this.deps.store.dialect, id, true);
      const changedColumns = (Object.keys(patch) as (keyof UserRow)[]).filter((k) => patch[k] !== current[k]);
      if (changedColumns.length === 0) return toUser(current);
      const changes = Object.fromEntries(changedColumns.map((k) => [k, patch[k]])) as Partial<UserRow>;
      const updated: UserRow = { ...current, ...changes, updated_at: iso(this.deps.clock.now()) };
      try {
        await tx.db
          .updateTable('users')
          .set({ ...changes, updated_at: updated.updated_at })
          .where('id', '=', id)
          .execute();
      } catch (err) {
        if (isUniqueViolation(err)) {
          throw new DomainError('already_exists', 'Another user has this email.', [
            { field: 'email', message: 'email is taken', code: 'taken' },
          ]);
        }
        throw err;
      }
      const user = toUser(updated);
      const changed = [...fields].filter((f) => FIELD_COLUMNS[f].some((c) => changedColumns.includes(c)));
      await tx.recordEvent('user.updated', id, { object: publicUserData(user), changed });
      tx.afterCommit({ kind: 'user.changed', userId: id });
      return user;
    });
  }

  /**
   * Soft-deletes a user (admins; the CLI acts as the system). The user is then not_found on every
   * read and their API keys and tokens are refused. Unknown or already deleted: not_found.
   */
  async delete(actor: Actor, id: string): Promise<{ id: string; deletedAt: string }> {
    assertMayDeleteUser(actor);
    return inTransaction(this.deps, async (tx) => {
      await liveUser(tx.db, this.deps.store.dialect, id, true);
      const now = iso(this.deps.clock.now());
      await tx.db
        .updateTable('users')
        .set({ deleted_at: now, updated_at: now })
        .where('id', '=', id)
        .execute();
      // A deleted user is not found on any API, so neither are its webhook endpoints; removing them
      // (their pending deliveries and attempts go with them) stops events, and the personal data in
      // them, from still reaching the account's URLs.
      await tx.db.deleteFrom('webhook_endpoints').where('user_id', '=', id).execute();
      tx.afterCommit({ kind: 'user.changed', userId: id });
      return { id, deletedAt: now };
    });
  }

  /**
   * A page of users by id ascending after `cursor`, the id of the last user received (gRPC ListUsers
   * streams through these). Ids are time-ordered, so a cursor naming no live user (deleted since,
   * or made up) still marks a place: the page starts after it. A cursor that cannot be a user id
   * is refused (`invalid_cursor`), not read as "from the start".
   */
  async page(viewer: Viewer, query: PageQuery): Promise<User[]> {
    assertMayListUsers(viewer);
    const problems = this.pageProblems(query);
    if (!Number.isInteger(query.limit) || query.limit < 1 || query.limit > MAX_USERS_PAGE) {
      problems.add('limit', `limit must be an integer from 1 to ${MAX_USERS_PAGE}`, 'range_error');
    }
    problems.throwIfAny();
    return this.list({ role: query.role, limit: query.limit, after: query.cursor ?? undefined });
  }

  /**
   * The problems of a page query's role and cursor, added to `problems`: for a surface that checks
   * its own paging fields (ListUsers's `limit`) and reports every problem at once.
   */
  pageProblems(query: Omit<PageQuery, 'limit'>, problems = new Problems()): Problems {
    if (query.role !== undefined && !ROLES.includes(query.role)) {
      problems.add('role', 'role must be one of admin, member, viewer', 'invalid_enum');
    }
    if (query.cursor !== undefined && query.cursor !== null && !isId(query.cursor, 'usr')) {
      // The value is not repeated: it may be as long as a request allows.
      problems.add(
        'cursor',
        'cursor must be a user id (usr_...): the id of the last user received',
        'invalid_cursor',
      );
    }
    return problems;
  }

  /** `given`: run in the caller's transaction (an idempotent request); else in one of its own. */
  async markEmailVerified(actor: Actor, id: string, given?: Tx): Promise<User> {
    if (!isAdmin(actor) && actor.id !== id) throw forbidden('You may verify only your own email.');
    return inGivenTransaction(this.deps, given, async (tx) => {
      // Locked, so of concurrent verifications only the first sees the email unverified.
      const current = await liveUser(tx.db, this.deps.store.dialect, id, true);
      const now = iso(this.deps.clock.now());
      const verifiedAt = current.email_verified_at ?? now;
      await tx.db
        .updateTable('users')
        .set({ email_verified_at: verifiedAt, updated_at: now })
        .where('id', '=', id)
        .execute();
      const user = toUser({ ...current, email_verified_at: verifiedAt, updated_at: now });
      // Verifying again changes nothing a subscriber could see, so only the first time is an event.
      if (current.email_verified_at === null) {
        await tx.recordEvent('user.updated', id, {
          object: publicUserData(user),
          changed: ['email_verified'],
        });
      }
      tx.afterCommit({ kind: 'user.changed', userId: id });
      return user;
    });
  }

  async setPassword(id: string, password: string): Promise<void> {
    if (password.length < 8 || password.length > 1024) {
      new Problems().add('password', 'password must be 8 to 1024 characters', 'range_error').throwIfAny();
    }
    const hash = await hashPassword(password);
    const res = await this.deps.store.db
      .updateTable('users')
      .set({ password_hash: hash })
      .where('id', '=', id)
      .executeTakeFirst();
    if (Number(res.numUpdatedRows) === 0) throw userNotFound(id);
  }
}

/** Validates an update: its problems, the columns it sets, and the fields present (even if unchanged). */
function checkUpdate(input: UpdateUserInput): {
  problems: Problems;
  patch: Partial<UserRow>;
  fields: Set<UserField>;
} {
  const problems = new Problems();
  const patch: Partial<UserRow> = {};
  const fields = new Set<UserField>();
  if (input.name !== undefined) {
    fields.add('name');
    const bad = checkName(input.name, 'name');
    if (bad) problems.add('name', bad, 'range_error');
    else Object.assign(patch, toNameColumns(splitName(input.name)));
  }
  for (const [field, column] of [
    ['firstName', 'first_name'],
    ['lastName', 'last_name'],
  ] as const) {
    const value = input[field];
    if (value === undefined) continue;
    fields.add(field);
    const bad = value === null ? null : checkName(value, field);
    if (bad) problems.add(field, bad, 'range_error');
    else patch[column] = value === null ? null : value.trim();
  }
  if (input.email !== undefined) {
    fields.add('email');
    const bad = checkEmail(input.email);
    if (bad) problems.add('email', `email ${bad}`, 'invalid_format');
    else patch.email = normaliseEmail(input.email);
  }
  if (input.role !== undefined) {
    fields.add('role');
    if (!ROLES.includes(input.role))
      problems.add('role', 'role must be one of admin, member, viewer', 'invalid_enum');
    else patch.role = input.role;
  }
  return { problems, patch, fields };
}

export type Reader = Db | Transaction<Database>;

/** Users that exist: soft-deleted ones are invisible to every read. */
function liveUsers(db: Reader) {
  return db.selectFrom('users').selectAll().where('deleted_at', 'is', null);
}

/** The one-user read (every GetUser, every update): compiled once per dialect, run with the id. */
const liveUserById = fixedQuery((db, id: string) => liveUsers(db).where('id', '=', id));

/**
 * What every surface and command says of a user id that names no live user, so they all word it
 * alike. A string that cannot be a user id (D2: `usr_` and 26 Crockford base32 characters) is not
 * repeated in the message, since it may be any size a request allows (a megabyte through gRPC, too
 * large for a status) or hold what PostgreSQL refuses (NUL). A well-formed id is 30 characters,
 * so echoing it stays short.
 */
export function userNotFound(id: string): DomainError {
  return isId(id, 'usr') ? notFound('User', id) : notFound('User');
}

const liveUserByIdForUpdate = fixedQuery((db, id: string) => liveUsers(db).where('id', '=', id).forUpdate());

/**
 * A live user by id, or not_found (userNotFound). A string that cannot be a user id matches no user
 * and is not read. Everything that needs a user to exist asks here (the core, API keys, OAuth
 * clients), so the answer and its wording are one. With `lock`, for a read-then-write in a
 * transaction, PostgreSQL holds the row until the transaction ends: a writer that waited for it reads
 * the row as committed, and finds no live user if it was deleted meanwhile. SQLite has no FOR UPDATE
 * and needs none: its transactions take the write lock as they begin.
 */
export async function liveUser(db: Reader, dialect: Dialect, id: string, lock = false): Promise<UserRow> {
  if (!isId(id, 'usr')) throw userNotFound(id);
  const [row] = await (lock && dialect === 'postgres' ? liveUserByIdForUpdate : liveUserById)(
    db,
    dialect,
    id,
  );
  if (!row) throw userNotFound(id);
  return row;
}

function toNameColumns(n: { firstName: string | null; lastName: string | null }): Partial<UserRow> {
  return { first_name: n.firstName, last_name: n.lastName };
}

function stripHash(u: User & { passwordHash: string | null }): User {
  const { passwordHash: _drop, ...user } = u;
  return user;
}

/** The columns a User is made of: a user row without its password hash and deletion mark. */
export type UserFields = Omit<UserRow, 'password_hash' | 'deleted_at'>;

export function toUser(row: UserFields): User {
  return {
    id: row.id,
    organizationId: row.organization_id,
    handle: row.handle,
    email: row.email,
    firstName: row.first_name,
    lastName: row.last_name,
    name: joinName(row.first_name, row.last_name),
    role: row.role,
    emailVerifiedAt: row.email_verified_at,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/** The user as webhook payloads and the REST API show it. */
export type PublicUserData = {
  id: string;
  name: string;
  email: string;
  role: Role;
  created_at: string;
  organization_id: string;
};

export function publicUserData(u: User): PublicUserData {
  return {
    id: u.id,
    name: u.name,
    email: u.email,
    role: u.role,
    created_at: u.createdAt,
    organization_id: u.organizationId,
  };
}
