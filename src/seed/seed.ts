import type { Services } from '../compose.js';

export interface SeedOptions {
  size: 'small' | 'large';
  progress?: ((line: string) => void) | undefined;
}

/** Placeholder replaced by the seed work item; fails loudly rather than pretending to seed. */
export async function seedDemoData(_services: Services, _options: SeedOptions): Promise<unknown> {
  throw new Error('seed is not built yet');
}
