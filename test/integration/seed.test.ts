import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeServices, createServices, type Services } from '../../src/compose.js';
import { parseConfig } from '../../src/config/schema.js';
import { DomainError } from '../../src/domain/errors.js';
import { SYSTEM_ACTOR } from '../../src/domain/actor.js';
import { idTime } from '../../src/domain/ids.js';
import { ClientService } from '../../src/oauth/clients.js';
import { discountFor } from '../../src/domain/coupons.js';
import { DEMO_PASSWORD, PLANS } from '../../src/seed/plan.js';
import { seedDemoData, type SeedResult } from '../../src/seed/seed.js';
import type { OrderStatus } from '../../src/store/types.js';
import { runCli } from '../helpers/cli.js';
import { freshDatabase, type TestDatabase } from '../helpers/database.js';

describe('seedDemoData (small)', () => {
  let database: TestDatabase;
  let services: Services;
  let result: SeedResult;
  const progress: string[] = [];

  beforeAll(async () => {
    database = await freshDatabase();
    services = await createServices(
      parseConfig({ NODE_ENV: 'test', DATABASE_URL: database.url, LOG_LEVEL: 'silent' }),
    );
    result = await seedDemoData(services, { size: 'small', progress: (line) => progress.push(line) });
  }, 60_000);
  afterAll(async () => {
    await closeServices(services);
    await database.drop();
  });

  const db = () => services.store.db;
  const count = async (
    table: 'organizations' | 'users' | 'posts' | 'comments' | 'products' | 'coupons' | 'orders',
  ) =>
    Number(
      (
        await db()
          .selectFrom(table)
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .executeTakeFirstOrThrow()
      ).n,
    );

  it('makes the promised amounts, and reports what it made', async () => {
    const plan = PLANS.small;
    const expected = {
      organizations: plan.organizations,
      users: plan.users + 3,
      posts: plan.posts,
      comments: plan.comments,
      products: plan.products,
      coupons: 5,
      orders: plan.orders,
    };
    for (const [table, n] of Object.entries(expected)) {
      expect(await count(table as keyof typeof expected), table).toBe(n);
      expect(result.counts[table], table).toBe(n);
    }
    expect(plan.users).toBeGreaterThanOrEqual(20);
    expect(plan.posts).toBeGreaterThanOrEqual(100);
    expect(plan.comments).toBeGreaterThanOrEqual(1000);
    expect(PLANS.large.orders).toBeGreaterThanOrEqual(100_000);
    expect(progress.filter((l) => l.startsWith('orders'))).toHaveLength(1);
    expect(progress.at(-1)).toBe(`orders ${plan.orders}/${plan.orders}`);
  });

  it('prints users with the demo password, an admin among them, and working API keys', async () => {
    expect(result.users).toHaveLength(PLANS.small.users + 3);
    expect(result.users.every((u) => u.password === DEMO_PASSWORD)).toBe(true);
    expect(result.users.filter((u) => u.role === 'admin').length).toBeGreaterThanOrEqual(1);
    expect(new Set(result.users.map((u) => u.organization_id)).size).toBe(PLANS.small.organizations);
    const admin = await services.core.users.authenticate('demo_admin', DEMO_PASSWORD);
    expect(admin?.role).toBe('admin');
    expect(await services.core.users.authenticate('demo_admin', 'wrong-password')).toBeUndefined();

    const tiers = Object.fromEntries(
      await Promise.all(
        result.api_keys.map(async (k) => {
          const principal = await services.apiKeys.resolve(k.key);
          expect(principal.id).toBe(k.user_id);
          return [result.users.find((u) => u.id === k.user_id)!.handle, principal.tier];
        }),
      ),
    );
    expect(tiers).toEqual({ demo_admin: 'enterprise', demo_member: 'free', demo_viewer: 'starter' });
  });

  it('registers a confidential and a public OAuth client, secrets shown once', async () => {
    const clients = new ClientService(services.deps, services.config);
    const confidential = result.clients.find((c) => c.kind === 'confidential')!;
    const pub = result.clients.find((c) => c.kind === 'public')!;
    expect(confidential.client_secret).toEqual(expect.any(String));
    expect(pub.client_secret).toBeNull();
    expect(
      (await clients.authenticate(confidential.client_id, confidential.client_secret!))?.confidential,
    ).toBe(true);
    expect(await clients.authenticate(confidential.client_id, 'wrong')).toBeUndefined();
    const stored = await clients.get(pub.client_id);
    expect(stored).toMatchObject({ confidential: false, redirectUris: pub.redirect_uris });
    // Swagger UI's Authorize on /docs sends this redirect URI (PUBLIC_URL, here the default).
    expect(pub.redirect_uris).toContain(`${services.config.publicUrl}/docs/static/oauth2-redirect.html`);
    expect(stored!.grantTypes).toContain('authorization_code');
    const row = await db()
      .selectFrom('oauth_clients')
      .select('secret_hash')
      .where('id', '=', confidential.client_id)
      .executeTakeFirstOrThrow();
    expect(row.secret_hash).not.toContain(confidential.client_secret!);
  });

  it('has orders in every status with amounts consistent with items, catalogue and coupon', async () => {
    const [orders, items, products, coupons, refunds] = await Promise.all([
      db().selectFrom('orders').selectAll().execute(),
      db().selectFrom('order_items').selectAll().execute(),
      db().selectFrom('products').selectAll().execute(),
      db().selectFrom('coupons').selectAll().execute(),
      db().selectFrom('refunds').selectAll().execute(),
    ]);
    const statuses = new Set(orders.map((o) => o.status));
    expect([...statuses].sort()).toEqual(['CANCELLED', 'DELIVERED', 'PENDING', 'PROCESSING', 'SHIPPED']);

    const price = new Map(products.map((p) => [p.id, p]));
    const coupon = new Map(coupons.map((c) => [c.code, c]));
    const itemsOf = new Map<string, typeof items>();
    for (const item of items) itemsOf.set(item.order_id, [...(itemsOf.get(item.order_id) ?? []), item]);
    const users = new Set(result.users.map((u) => u.id));
    const now = Date.now();
    for (const order of orders) {
      const lines = itemsOf.get(order.id) ?? [];
      expect(lines.length).toBeGreaterThanOrEqual(1);
      for (const line of lines) {
        expect(line.unit_price_cents).toBe(price.get(line.product_id)!.price_cents);
        expect(price.get(line.product_id)!.active).toBe(1);
        expect(line.quantity).toBeGreaterThanOrEqual(1);
      }
      const subtotal = lines.reduce((s, l) => s + l.quantity * l.unit_price_cents, 0);
      expect(order.subtotal_cents).toBe(subtotal);
      const used = order.coupon_code === null ? null : coupon.get(order.coupon_code)!;
      if (used) expect(used.active).toBe(1);
      const asCoupon = used && {
        code: used.code,
        percentOff: used.percent_off,
        amountOffCents: used.amount_off_cents,
        active: true,
        createdAt: used.created_at,
      };
      expect(order.discount_cents).toBe(discountFor(asCoupon, subtotal));
      expect(order.amount_cents).toBe(order.subtotal_cents - order.discount_cents);
      expect(users.has(order.owner_id)).toBe(true);
      expect(idTime(order.id)).toBe(Date.parse(order.created_at));
      expect(order.updated_at >= order.created_at).toBe(true);
      expect(Date.parse(order.updated_at)).toBeLessThanOrEqual(now);
      const address = JSON.parse(order.shipping_address);
      expect(Object.keys(address).sort()).toEqual(['city', 'country', 'name', 'postal_code', 'street']);
      expect(address.country).toMatch(/^[A-Z]{2}$/);
    }
    expect(orders.some((o) => o.coupon_code !== null)).toBe(true);

    expect(refunds.length).toBeGreaterThan(0);
    const byId = new Map(orders.map((o) => [o.id, o]));
    const refundable: OrderStatus[] = ['SHIPPED', 'DELIVERED'];
    for (const refund of refunds) {
      const order = byId.get(refund.order_id)!;
      expect(refundable).toContain(order.status);
      expect(refund.amount_cents).toBe(order.amount_cents);
      expect(refund.created_at >= order.created_at).toBe(true);
    }
  });

  it('prints the catalogue (products with their ids, coupon codes) so a new user can order at once', async () => {
    const stored = await db()
      .selectFrom('products')
      .select(['id', 'name', 'price_cents', 'active'])
      .execute();
    expect(result.products).toHaveLength(stored.length);
    expect(result.products.filter((p) => p.active)).toHaveLength(stored.filter((p) => p.active === 1).length);
    for (const row of stored) {
      expect(result.products).toContainEqual({
        id: row.id,
        name: row.name,
        price_cents: row.price_cents,
        active: row.active === 1,
      });
    }
    const codes = (await db().selectFrom('coupons').select(['code', 'active']).execute()).map((c) => [
      c.code,
      c.active === 1,
    ]);
    expect(result.coupons.map((c) => [c.code, c.active]).sort()).toEqual(codes.sort());
    const product = result.products.find((p) => p.active)!;
    const coupon = result.coupons.find((c) => c.active)!;
    const buyer = result.users.find((u) => u.role === 'member')!;
    const order = await services.core.orders.create(
      { id: buyer.id, kind: 'user', role: 'member' },
      {
        items: [{ productId: product.id, quantity: 1 }],
        currency: 'USD',
        couponCode: coupon.code,
        shippingAddress: { name: 'A', street: 'S 1', city: 'C', postalCode: '12345', country: 'US' },
      },
    );
    expect(order.subtotalCents).toBe(product.price_cents);
  });

  it('writes orders the order service reads and acts on under its own state rules', async () => {
    const orders = () =>
      db()
        .selectFrom('orders')
        .leftJoin('refunds', 'refunds.order_id', 'orders.id')
        .select(['orders.id', 'orders.owner_id', 'orders.amount_cents']);
    const ownerOf = (row: { owner_id: string }) => ({
      id: row.owner_id,
      kind: 'user' as const,
      role: 'member' as const,
    });

    const refunded = await orders().where('refunds.id', 'is not', null).executeTakeFirstOrThrow();
    const viaService = await services.core.orders.get(ownerOf(refunded), refunded.id);
    expect(viaService.refundedAt).not.toBeNull();
    expect(viaService.amountCents).toBe(refunded.amount_cents);
    expect(viaService.items.length).toBeGreaterThanOrEqual(1);
    await expect(services.core.orders.refund(ownerOf(refunded), refunded.id)).rejects.toMatchObject({
      code: 'conflict',
    });

    const delivered = await orders()
      .where('orders.status', '=', 'DELIVERED')
      .where('refunds.id', 'is', null)
      .executeTakeFirstOrThrow();
    await expect(services.core.orders.cancel(ownerOf(delivered), delivered.id)).rejects.toMatchObject({
      code: 'conflict',
    });
    const pending = await orders().where('orders.status', '=', 'PENDING').executeTakeFirstOrThrow();
    expect((await services.core.orders.cancel(ownerOf(pending), pending.id)).status).toBe('CANCELLED');
  });

  it('writes posts with tags and comments that follow their published post', async () => {
    const connection = await services.core.posts.list(SYSTEM_ACTOR, { first: 5 });
    expect(await connection.totalCount()).toBe(PLANS.small.posts);
    const ids = connection.edges.map((e) => e.node.id);
    const tags = await services.core.posts.tagsFor(ids);
    expect([...tags.values()].every((t) => t.length >= 1)).toBe(true);
    const late = await db()
      .selectFrom('comments')
      .innerJoin('posts', 'posts.id', 'comments.post_id')
      .select('comments.id')
      .where((eb) =>
        eb.or([
          eb('comments.created_at', '<=', eb.ref('posts.created_at')),
          eb('posts.published_at', 'is', null),
        ]),
      )
      .execute();
    expect(late).toEqual([]);
    expect((await services.core.search.search(null, 'caching', 5)).length).toBeGreaterThan(0);
  });

  it('refuses a second run with a conflict and writes nothing more', async () => {
    // Counted before, not taken from the plan: the tests above add an order of their own.
    const before = [await count('users'), await count('orders')];
    const err = await seedDemoData(services, { size: 'small' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DomainError);
    expect((err as DomainError).code).toBe('conflict');
    expect((err as DomainError).message).toMatch(/already holds demo data/);
    expect(before[0]).toBe(PLANS.small.users + 3);
    expect([await count('users'), await count('orders')]).toEqual(before);
  });
});

describe('atrium seed', () => {
  let dir: string;
  let database: TestDatabase;
  let env: Record<string, string>;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'atrium-seed-'));
    database = await freshDatabase();
    env = { DATABASE_URL: database.dialect === 'sqlite' ? `sqlite:${join(dir, 'seed.db')}` : database.url };
  });
  afterAll(async () => {
    rmSync(dir, { recursive: true, force: true });
    await database.drop();
  });

  it('prints one JSON object with users, API keys and clients, and refuses to run twice', async () => {
    const first = await runCli(['seed'], env);
    expect(first.code, first.stderr).toBe(0);
    const lines = first.stdout.trim().split('\n');
    expect(lines).toHaveLength(1);
    const printed = JSON.parse(lines[0]!);
    expect(printed.users.length).toBe(PLANS.small.users + 3);
    expect(printed.api_keys[0].key).toMatch(/^atr_test_/);
    expect(printed.clients.map((c: { kind: string }) => c.kind).sort()).toEqual(['confidential', 'public']);
    // What a new user needs to make an order, printed by the command itself.
    expect(printed.products).toHaveLength(PLANS.small.products);
    expect(printed.products[0]).toMatchObject({ id: expect.stringMatching(/^prd_/), active: true });
    expect(printed.coupons.map((c: { code: string }) => c.code)).toContain('WELCOME10');

    const second = await runCli(['seed'], env);
    expect(second.code).toBe(1);
    expect(second.stdout).toBe('');
    expect(JSON.parse(second.stderr.trim().split('\n').at(-1)!)).toMatchObject({ error: 'conflict' });
  }, 60_000);
});
