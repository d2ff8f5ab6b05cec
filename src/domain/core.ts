import { CommentService } from './comments.js';
import type { CoreDeps } from './context.js';
import { CouponService } from './coupons.js';
import { IdempotencyService } from './idempotency.js';
import { OrderService } from './orders.js';
import { OrganizationService } from './organizations.js';
import { PostService } from './posts.js';
import { ProductService } from './products.js';
import { SearchService } from './search.js';
import { TagService } from './tags.js';
import { UserService } from './users.js';

/** Every domain service, built once by the composition root and shared by all surfaces. */
export interface Core {
  deps: CoreDeps;
  organizations: OrganizationService;
  users: UserService;
  products: ProductService;
  tags: TagService;
  posts: PostService;
  comments: CommentService;
  search: SearchService;
  coupons: CouponService;
  orders: OrderService;
  idempotency: IdempotencyService;
}

export function createCore(deps: CoreDeps): Core {
  const organizations = new OrganizationService(deps);
  const users = new UserService(deps, organizations);
  const products = new ProductService(deps);
  const tags = new TagService(deps);
  const posts = new PostService(deps, tags);
  const comments = new CommentService(deps);
  const search = new SearchService(deps);
  const coupons = new CouponService(deps);
  const orders = new OrderService(deps, coupons);
  const idempotency = new IdempotencyService(deps);
  return {
    deps,
    organizations,
    users,
    products,
    tags,
    posts,
    comments,
    search,
    coupons,
    orders,
    idempotency,
  };
}
