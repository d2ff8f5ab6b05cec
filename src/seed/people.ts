import { idAt } from '../domain/ids.js';
import type { OrganizationsTable, Role, UsersTable } from '../store/types.js';
import { DEMO_ACCOUNTS } from './plan.js';
import type { Random } from './random.js';
import { FIRST_NAMES, LAST_NAMES, ORGANIZATIONS } from './words.js';

/** Organizations and users of the demo data set, as rows ready to insert. */
export interface People {
  organizations: OrganizationsTable[];
  users: UsersTable[];
}

const slug = (s: string) =>
  s
    .toLowerCase()
    .normalize('NFKD')
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-|-$/g, '');

export function buildPeople(
  r: Random,
  opts: { organizations: number; users: number; passwordHash: string; fromMs: number; toMs: number },
): People {
  const at = () => opts.fromMs + Math.floor(r.next() * (opts.toMs - opts.fromMs));
  const organizations = ORGANIZATIONS.slice(0, opts.organizations).map((name) => {
    const ms = at();
    const iso = new Date(ms).toISOString();
    return { id: idAt('org', ms), name, created_at: iso, updated_at: iso };
  });
  const domainOf = new Map(organizations.map((o) => [o.id, `${slug(o.name)}.example`]));

  const users: UsersTable[] = [];
  const handles = new Set<string>();
  const unique = (wanted: string) => {
    let handle = wanted;
    for (let n = 2; handles.has(handle); n++) handle = `${wanted}${n}`;
    handles.add(handle);
    return handle;
  };
  const add = (first: string, last: string, role: Role, orgId: string, fixed?: string) => {
    const chosen = unique(fixed ?? `${slug(first)}_${slug(last)}`.replaceAll('-', '_'));
    const ms = at();
    const iso = new Date(ms).toISOString();
    users.push({
      id: idAt('usr', ms),
      organization_id: orgId,
      handle: chosen,
      email: `${chosen.replaceAll('_', '.')}@${domainOf.get(orgId)}`,
      first_name: first,
      last_name: last,
      role,
      password_hash: opts.passwordHash,
      email_verified_at: r.chance(0.8) ? iso : null,
      created_at: iso,
      updated_at: iso,
      deleted_at: null,
    });
  };

  for (const account of DEMO_ACCOUNTS) {
    add(account.firstName, account.lastName, account.role, organizations[0]!.id, account.handle);
  }
  for (let i = 0; i < opts.users; i++) {
    // Every organization gets an admin first; after that roughly 1 in 6 users only reads.
    const org = organizations[i % organizations.length]!;
    const role: Role =
      i < organizations.length
        ? 'admin'
        : r.weighted([
            ['member', 80],
            ['viewer', 17],
            ['admin', 3],
          ] as const);
    add(r.pick(FIRST_NAMES), r.pick(LAST_NAMES), role, org.id);
  }
  return { organizations, users };
}
