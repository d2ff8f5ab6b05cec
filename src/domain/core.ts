import type { CoreDeps } from './context.js';
import { OrganizationService } from './organizations.js';
import { ProductService } from './products.js';
import { UserService } from './users.js';

/** Every domain service, built once by the composition root and shared by all surfaces. */
export interface Core {
  deps: CoreDeps;
  organizations: OrganizationService;
  users: UserService;
  products: ProductService;
}

export function createCore(deps: CoreDeps): Core {
  const organizations = new OrganizationService(deps);
  const users = new UserService(deps, organizations);
  const products = new ProductService(deps);
  return { deps, organizations, users, products };
}
