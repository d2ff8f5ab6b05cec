import type { LightMyRequestResponse } from 'fastify';
import { expect } from 'vitest';
import type { ServicesOptions } from '../../../src/compose.js';
import { startTestAtrium, type TestAtrium } from '../../helpers/atrium.js';
import { call, type RestAnswer } from '../../helpers/rest-client.js';
import { forSuite } from '../../helpers/suite.js';

/** Shared set-up for the order API tests: a small catalogue, coupons and request helpers. */
export const ADDRESS = {
  name: 'Ada Lovelace',
  street: '12 St James Square',
  city: 'London',
  postal_code: 'SW1Y 4JH',
  country: 'GB',
};

export interface Catalogue {
  widget: string; // 12.50
  gadget: string; // 3.99
  retired: string; // inactive
  pricey: string; // 1,000,000.00
}

export async function makeCatalogue(atrium: TestAtrium): Promise<Catalogue> {
  const { products, coupons } = atrium.services.core;
  const widget = await products.create({ name: 'Widget', priceCents: 1250 });
  const gadget = await products.create({ name: 'Gadget', priceCents: 399 });
  const retired = await products.create({ name: 'Retired thing', priceCents: 100 });
  await atrium.services.store.db
    .updateTable('products')
    .set({ active: 0 })
    .where('id', '=', retired.id)
    .execute();
  const pricey = await products.create({ name: 'Yacht', priceCents: 100_000_000 });
  await coupons.create({ code: 'TENOFF', percentOff: 10 });
  await coupons.create({ code: 'FIVEBUCKS', amountOffCents: 500 });
  await coupons.create({ code: 'OLD', percentOff: 50 });
  await coupons.deactivate('OLD');
  return { widget: widget.id, gadget: gadget.id, retired: retired.id, pricey: pricey.id };
}

export function orderBody(catalogue: Catalogue, extra: Record<string, unknown> = {}) {
  return {
    items: [
      { product_id: catalogue.widget, quantity: 2 },
      { product_id: catalogue.gadget, quantity: 1 },
    ],
    currency: 'USD',
    shipping_address: ADDRESS,
    ...extra,
  };
}

export type Headers = Record<string, string>;

export function request(
  atrium: TestAtrium,
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE' | 'HEAD',
  url: string,
  headers: Headers,
  payload?: unknown,
): Promise<LightMyRequestResponse> {
  return atrium.http!.inject({
    method,
    url,
    headers: payload === undefined ? headers : { 'content-type': 'application/json', ...headers },
    ...(payload === undefined
      ? {}
      : { payload: typeof payload === 'string' ? payload : JSON.stringify(payload) }),
  });
}

/** Creates an order through the API and returns its v2 body. */
export async function createOrder(
  atrium: TestAtrium,
  headers: Headers,
  body: unknown,
): Promise<Record<string, unknown> & { id: string }> {
  const res = await request(atrium, 'POST', '/api/v2/orders', headers, body);
  if (res.statusCode !== 201) throw new Error(`create failed: ${res.statusCode} ${res.body}`);
  return res.json();
}

/** Moves an order forward through PATCH as an admin until it reaches `status`. */
export async function advanceTo(
  atrium: TestAtrium,
  admin: Headers,
  id: string,
  status: string,
): Promise<void> {
  const path = ['PENDING', 'PROCESSING', 'SHIPPED', 'DELIVERED'];
  const target = path.indexOf(status);
  for (let i = 1; i <= target; i++) {
    const res = await request(atrium, 'PATCH', `/api/v2/orders/${id}`, admin, { status: path[i] });
    if (res.statusCode !== 200) throw new Error(`advance failed: ${res.statusCode} ${res.body}`);
  }
}

export interface Shop {
  atrium: TestAtrium;
  cat: Catalogue;
  owner: Headers;
  admin: Headers;
}

/** An Atrium with the catalogue, an order owner and an admin (created in that order). */
export async function startShop(env: Record<string, string> = {}): Promise<Shop> {
  const atrium = await startTestAtrium(env);
  const cat = await makeCatalogue(atrium);
  const owner = (await atrium.caller()).headers;
  const admin = (await atrium.caller({ role: 'admin' })).headers;
  return { atrium, cat, owner, admin };
}

/** The events recorded about one order, oldest first, their data parsed. */
export async function orderEvents(
  atrium: TestAtrium,
  id: string,
): Promise<{ type: string; data: Record<string, unknown> }[]> {
  const rows = await atrium.services.store.db
    .selectFrom('events')
    .select(['type', 'data'])
    .where('data', 'like', `%"id":"${id}"%`)
    .orderBy('id')
    .execute();
  return rows.map((e) => ({ type: e.type, data: JSON.parse(e.data) as Record<string, unknown> }));
}

/** The shop of startShop for the enclosing describe block (see forSuite), stopped after its tests. */
export function shopForSuite(env: Record<string, string> = {}): Shop {
  return forSuite(
    () => startShop(env),
    (shop) => shop.atrium.stop(),
  );
}

/** A new PENDING order of orderBody's items, created by the shop's owner. */
export const freshOrder = (shop: Shop) => createOrder(shop.atrium, shop.owner, orderBody(shop.cat));

/** How many orders the store holds, read straight from it (to show a refused request stored nothing). */
export async function orderCount(atrium: TestAtrium): Promise<number> {
  const row = await atrium.services.store.db
    .selectFrom('orders')
    .select((eb) => eb.fn.countAll().as('n'))
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

export interface SocketShop {
  atrium: TestAtrium;
  /** The HTTP base URL the API listens on. */
  base: string;
  cat: Catalogue;
  owner: Headers;
  /** A request over the socket as `owner`, with extra (conditional) headers and a JSON body. */
  send(method: string, path: string, conditions?: Headers, json?: unknown): Promise<RestAnswer>;
}

/**
 * An API-only Atrium listening on a real socket, the catalogue and an order owner, for the enclosing
 * describe block (see forSuite), stopped after its tests.
 */
export function socketShopForSuite(options: ServicesOptions = {}): SocketShop {
  return forSuite(
    async () => {
      const atrium = await startTestAtrium({}, ['api'], options);
      const base = (await atrium.listen()).httpUrl!;
      const owner = (await atrium.caller()).headers;
      const cat = await makeCatalogue(atrium);
      const send: SocketShop['send'] = (method, path, conditions = {}, json) =>
        call(base, method, path, {
          headers: { ...owner, ...conditions },
          ...(json === undefined ? {} : { json }),
        });
      return { atrium, base, cat, owner, send };
    },
    (shop) => shop.atrium.stop(),
  );
}

/** 412 precondition_failed in the spec's error shape: a conditional write refused. */
export function expectPreconditionFailed(res: RestAnswer): void {
  expect(res.status, res.text).toBe(412);
  expect(res.body).toEqual({
    error: 'precondition_failed',
    message: expect.any(String),
    request_id: res.headers.get('x-request-id'),
    details: [],
  });
}
