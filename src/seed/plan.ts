import type { Role, Tier } from '../store/types.js';

export type SeedSize = 'small' | 'large';

export interface SeedPlan {
  organizations: number;
  /** Generated users, besides the fixed demo accounts. */
  users: number;
  posts: number;
  comments: number;
  products: number;
  orders: number;
  /** Posts, comments and orders are spread over this many days before now. */
  spanDays: number;
}

/**
 * `small` is a browsable demo that seeds in seconds; `large` is for benchmarks (≥ 100,000 orders,
 * with enough users that per-caller order lists are a few hundred long).
 */
export const PLANS: Record<SeedSize, SeedPlan> = {
  small: {
    organizations: 4,
    users: 40,
    posts: 300,
    comments: 3_000,
    products: 50,
    orders: 1_500,
    spanDays: 180,
  },
  large: {
    organizations: 10,
    users: 200,
    posts: 2_000,
    comments: 20_000,
    products: 50,
    orders: 100_000,
    spanDays: 365,
  },
};

/** The one password of every demo user, printed in the result. Demo data only. */
export const DEMO_PASSWORD = 'atrium-demo-password';

/** Accounts with known handles, so docs and examples can name them; each gets an API key. */
export const DEMO_ACCOUNTS: ReadonlyArray<{
  handle: string;
  firstName: string;
  lastName: string;
  role: Role;
  tier: Tier;
}> = [
  { handle: 'demo_admin', firstName: 'Demo', lastName: 'Admin', role: 'admin', tier: 'enterprise' },
  { handle: 'demo_member', firstName: 'Demo', lastName: 'Member', role: 'member', tier: 'free' },
  { handle: 'demo_viewer', firstName: 'Demo', lastName: 'Viewer', role: 'viewer', tier: 'starter' },
];

export const DEMO_COUPONS = [
  { code: 'WELCOME10', percent_off: 10, amount_off_cents: null, active: 1 },
  { code: 'SPRING25', percent_off: 25, amount_off_cents: null, active: 1 },
  { code: 'FIVEOFF', percent_off: null, amount_off_cents: 500, active: 1 },
  { code: 'BIGSPENDER', percent_off: null, amount_off_cents: 2_000, active: 1 },
  { code: 'EXPIRED15', percent_off: 15, amount_off_cents: null, active: 0 },
] as const;

/** The settings row that marks a database as seeded, so a second run refuses instead of doubling. */
export const SEED_MARKER = 'demo_seed';
