import type { Principal } from '../auth/principal.js';
import type { Services } from '../compose.js';

/**
 * Per-operation DataLoaders over the core's batched reads, so a page of posts with their authors and
 * comments costs a constant number of statements. Filled in by the schema work.
 */
export type Loaders = Record<string, never>;

export function createLoaders(_services: Services, _principal: Principal | null): Loaders {
  return {};
}
