import { byIds } from './batch.js';
import { iso } from './clock.js';
import type { CoreDeps } from './context.js';
import { notFound, Problems } from './errors.js';
import { newId } from './ids.js';
import { checkText } from './validate.js';

export interface Product {
  id: string;
  name: string;
  priceCents: number;
  active: boolean;
  createdAt: string;
}

export class ProductService {
  constructor(private readonly deps: CoreDeps) {}

  async create(input: { name: string; priceCents: number }): Promise<Product> {
    const problems = new Problems();
    const bad = checkText(input.name, 1, 200);
    if (bad) problems.add('name', `name ${bad}`);
    if (!Number.isSafeInteger(input.priceCents) || input.priceCents < 0 || input.priceCents > 100_000_000) {
      problems.add('priceCents', 'priceCents must be an integer from 0 to 100000000', 'range_error');
    }
    problems.throwIfAny();
    const now = this.deps.clock.now();
    const row = {
      id: newId('prd', now.getTime()),
      name: input.name.trim(),
      price_cents: input.priceCents,
      active: 1,
      created_at: iso(now),
      updated_at: iso(now),
    };
    await this.deps.store.db.insertInto('products').values(row).execute();
    return toProduct(row);
  }

  async get(id: string): Promise<Product> {
    const row = await this.deps.store.db
      .selectFrom('products')
      .selectAll()
      .where('id', '=', id)
      .executeTakeFirst();
    if (!row) throw notFound('Product', id);
    return toProduct(row);
  }

  getMany(ids: readonly string[]): Promise<Map<string, Product>> {
    const db = this.deps.store.db;
    return byIds(
      ids,
      'prd',
      (unique) => db.selectFrom('products').selectAll().where('id', 'in', unique).execute(),
      toProduct,
    );
  }

  async list(limit = 100): Promise<Product[]> {
    const rows = await this.deps.store.db
      .selectFrom('products')
      .selectAll()
      .orderBy('id', 'asc')
      .limit(limit)
      .execute();
    return rows.map(toProduct);
  }
}

function toProduct(row: {
  id: string;
  name: string;
  price_cents: number;
  active: number;
  created_at: string;
}): Product {
  return {
    id: row.id,
    name: row.name,
    priceCents: row.price_cents,
    active: row.active === 1,
    createdAt: row.created_at,
  };
}
