import type { CreatedApiKey } from '../auth/api-keys.js';
import type { Services } from '../compose.js';
import { DomainError } from '../domain/errors.js';
import { idAt } from '../domain/ids.js';
import { hashPassword } from '../domain/passwords.js';
import { isUniqueViolation } from '../store/errors.js';
import type { CouponsTable, ProductsTable, Role } from '../store/types.js';
import { insertRows } from './bulk.js';
import { productCatalogue } from './content.js';
import { type SeedClient, seedClients } from './clients.js';
import { seedOrders } from './orders.js';
import { buildPeople } from './people.js';
import { DEMO_ACCOUNTS, DEMO_COUPONS, DEMO_PASSWORD, PLANS, SEED_MARKER, type SeedSize } from './plan.js';
import { seedContent } from './posts.js';
import { Random } from './random.js';

export interface SeedOptions {
  size: SeedSize;
  progress?: ((line: string) => void) | undefined;
}

export interface SeedUser {
  id: string;
  handle: string;
  email: string;
  role: Role;
  password: string;
  organization_id: string;
}

/** What `atrium seed` prints: every secret once (passwords, API keys, client secrets). */
export interface SeedResult {
  users: SeedUser[];
  api_keys: CreatedApiKey[];
  clients: SeedClient[];
  organizations: { id: string; name: string }[];
  /** The catalogue, withdrawn products included: an order needs a product id and the API lists none. */
  products: { id: string; name: string; price_cents: number; active: boolean }[];
  coupons: { code: string; percent_off: number | null; amount_off_cents: number | null; active: boolean }[];
  counts: Record<string, number>;
  elapsed_ms: number;
}

const DAY = 86_400_000;
/** Same content on every run; only ids, secrets and dates (relative to now) differ. */
const PRNG_SEED = 20_261_101;

/**
 * Builds the demo data set in bulk with Kysely, in batched transactions. Runs once per database:
 * a second run finds the marker row and refuses with `conflict` rather than doubling the data or
 * failing halfway on a unique handle.
 */
export async function seedDemoData(services: Services, options: SeedOptions): Promise<SeedResult> {
  const started = Date.now();
  const plan = PLANS[options.size];
  const report = (line: string) => options.progress?.(line);
  const db = services.store.db;
  const r = new Random(PRNG_SEED);
  const now = services.clock.now().getTime();
  const spanMs = plan.spanDays * DAY;

  const people = buildPeople(r, {
    organizations: plan.organizations,
    users: plan.users,
    passwordHash: await hashPassword(DEMO_PASSWORD),
    fromMs: now - spanMs - 60 * DAY,
    toMs: now - spanMs - DAY,
  });
  await refuseIfSeeded(services, people.users);
  const catalogueMs = now - spanMs - DAY;
  const products: ProductsTable[] = productCatalogue(r, plan.products).map((p, i) => ({
    id: idAt('prd', catalogueMs + i),
    name: p.name,
    price_cents: p.priceCents,
    // Two withdrawn products show a catalogue with history; orders only use active ones.
    active: i >= plan.products - 2 ? 0 : 1,
    created_at: new Date(catalogueMs + i).toISOString(),
    updated_at: new Date(catalogueMs + i).toISOString(),
  }));
  const coupons: CouponsTable[] = DEMO_COUPONS.map((c) => ({
    ...c,
    created_at: new Date(catalogueMs).toISOString(),
  }));

  try {
    await db.transaction().execute(async (trx) => {
      // The marker goes in first: two seeds racing on one database collide here, not halfway.
      await trx
        .insertInto('settings')
        .values({
          key: SEED_MARKER,
          value: JSON.stringify({ state: 'in_progress', started_at: new Date(now) }),
        })
        .execute();
      await insertRows(trx, 'organizations', people.organizations);
      await insertRows(trx, 'users', people.users);
      await insertRows(trx, 'products', products);
      await insertRows(trx, 'coupons', coupons);
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw alreadySeeded('Another seed run or existing data holds the same keys.');
    throw err;
  }
  report(`users ${people.users.length}, products ${products.length}, coupons ${coupons.length}`);

  const writers = people.users.filter((u) => u.role !== 'viewer');
  const content = await seedContent(
    db,
    r,
    {
      posts: plan.posts,
      comments: plan.comments,
      fromMs: now - spanMs,
      now,
      authorIds: writers.map((u) => u.id),
    },
    report,
  );

  const owner = (u: (typeof people.users)[number]) => ({ id: u.id, name: `${u.first_name} ${u.last_name}` });
  const favoured = people.users.find((u) => u.handle === 'demo_member')!;
  const orders = await seedOrders(
    db,
    r,
    {
      count: plan.orders,
      spanMs,
      now,
      owners: writers.map(owner),
      favouredOwner: owner(favoured),
      products: products.filter((p) => p.active === 1),
      coupons: coupons.filter((c) => c.active === 1),
    },
    (done, total) => report(`orders ${done}/${total}`),
  );

  const apiKeys: CreatedApiKey[] = [];
  for (const account of DEMO_ACCOUNTS) {
    const user = people.users.find((u) => u.handle === account.handle)!;
    apiKeys.push(await services.apiKeys.create({ userId: user.id, tier: account.tier, mode: 'test' }));
  }
  const admin = people.users.find((u) => u.handle === 'demo_admin')!;
  const clients = await seedClients(services, admin.id);

  const counts = {
    organizations: people.organizations.length,
    users: people.users.length,
    posts: content.posts,
    tags: content.tags,
    comments: content.comments,
    products: products.length,
    coupons: coupons.length,
    orders: orders.orders,
    order_items: orders.items,
    refunds: orders.refunds,
    api_keys: apiKeys.length,
    clients: clients.length,
  };
  await db
    .updateTable('settings')
    .set({
      value: JSON.stringify({ state: 'complete', size: options.size, seeded_at: new Date(now), counts }),
    })
    .where('key', '=', SEED_MARKER)
    .execute();

  return {
    users: people.users.map((u) => ({
      id: u.id,
      handle: u.handle,
      email: u.email,
      role: u.role,
      password: DEMO_PASSWORD,
      organization_id: u.organization_id,
    })),
    api_keys: apiKeys,
    clients,
    organizations: people.organizations.map((o) => ({ id: o.id, name: o.name })),
    products: products.map((p) => ({
      id: p.id,
      name: p.name,
      price_cents: p.price_cents,
      active: p.active === 1,
    })),
    coupons: coupons.map((c) => ({
      code: c.code,
      percent_off: c.percent_off,
      amount_off_cents: c.amount_off_cents,
      active: c.active === 1,
    })),
    counts,
    elapsed_ms: Date.now() - started,
  };
}

function alreadySeeded(detail: string): DomainError {
  return new DomainError(
    'conflict',
    `This database already holds demo data. ${detail} Seed a fresh database instead ` +
      '(for example DATABASE_URL=sqlite:./data/demo.db atrium seed).',
  );
}

/** Refuses before any write when the marker, a demo handle or email, or a demo coupon code exists. */
async function refuseIfSeeded(
  services: Services,
  users: ReadonlyArray<{ handle: string; email: string }>,
): Promise<void> {
  const db = services.store.db;
  const marker = await db
    .selectFrom('settings')
    .select('value')
    .where('key', '=', SEED_MARKER)
    .executeTakeFirst();
  if (marker) {
    const state = JSON.parse(marker.value) as { state?: string; started_at?: string; seeded_at?: string };
    throw alreadySeeded(
      state.state === 'complete'
        ? `It was seeded at ${state.seeded_at}.`
        : `A seed started at ${state.started_at} did not finish.`,
    );
  }
  const [taken, codes] = await Promise.all([
    db
      .selectFrom('users')
      .select('handle')
      .where((eb) =>
        eb.or([
          eb(
            'handle',
            'in',
            users.map((u) => u.handle),
          ),
          eb(
            'email',
            'in',
            users.map((u) => u.email),
          ),
        ]),
      )
      .execute(),
    db
      .selectFrom('coupons')
      .select('code')
      .where(
        'code',
        'in',
        DEMO_COUPONS.map((c) => c.code),
      )
      .execute(),
  ]);
  if (taken.length > 0 || codes.length > 0) {
    const names = [...taken.map((t) => `user ${t.handle}`), ...codes.map((c) => `coupon ${c.code}`)];
    throw alreadySeeded(`It has ${names.join(', ')}.`);
  }
}
