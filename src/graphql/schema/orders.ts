/** Orders as GraphQL shows them (read-only here; orders are made through REST). */
export const orderTypeDefs = /* GraphQL */ `
  "Where an order is in its life."
  enum OrderStatus {
    "Placed, not yet handled."
    PENDING
    "Being prepared."
    PROCESSING
    "On its way."
    SHIPPED
    "Arrived."
    DELIVERED
    "Cancelled before shipping."
    CANCELLED
  }

  "An order of a user."
  type Order implements Node @key(fields: "id") {
    "Opaque, prefixed (ord_) identifier."
    id: ID!
    "The owner's id."
    userId: ID!
    "The owner."
    user: User!
    "Amount due after discounts, in the order's currency units (cents / 100)."
    totalAmount: Float!
    "Where the order is in its life."
    status: OrderStatus!
    "When the order was placed."
    createdAt: DateTime!
  }

  "A page of orders, newest first."
  type OrderConnection {
    "The orders of this page."
    edges: [OrderEdge!]!
    "Where this page sits."
    pageInfo: PageInfo!
    "Orders in the whole list."
    totalCount: Int!
  }

  "An order in a page."
  type OrderEdge {
    "The order."
    node: Order!
    "Where to continue from."
    cursor: String!
  }
`;
