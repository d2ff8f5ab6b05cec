import { CompiledQuery, type DatabaseConnection, type Dialect, type Driver } from 'kysely';

const BEGIN_IMMEDIATE = CompiledQuery.raw('begin immediate');

/**
 * Every SQLite transaction takes the write lock as it begins. Kysely's `begin` is deferred: a
 * transaction that reads and then writes asks for the lock only at its first write, and SQLite
 * does not wait there for another process's write (the admin commands beside the server): waiting
 * could deadlock two readers, so it answers SQLITE_BUSY at once, or SQLITE_BUSY_SNAPSHOT when the
 * other commit has landed. Asked for at `begin immediate`, the lock is waited for (busy_timeout),
 * and the transaction then runs on the newest data. The store's transactions are its writes, so
 * the lock costs them nothing a write would not.
 */
export function immediateTransactions(dialect: Dialect): Dialect {
  return {
    createDriver: (): Driver => {
      const driver = dialect.createDriver();
      return new Proxy(driver, {
        get(target, property) {
          if (property === 'beginTransaction') {
            return async (connection: DatabaseConnection) => {
              await connection.executeQuery(BEGIN_IMMEDIATE);
            };
          }
          const value = Reflect.get(target, property, target) as unknown;
          return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
        },
      });
    },
    createQueryCompiler: () => dialect.createQueryCompiler(),
    createAdapter: () => dialect.createAdapter(),
    createIntrospector: (db) => dialect.createIntrospector(db),
  };
}
