import type {
  CompiledQuery,
  DatabaseConnection,
  DatabaseIntrospector,
  Dialect,
  DialectAdapter,
  Driver,
  Kysely,
  QueryCompiler,
  QueryResult,
  TransactionSettings,
} from 'kysely';
import { currentRequestScope } from '../domain/request-scope.js';

const WRITES = new Set(['InsertQueryNode', 'UpdateQueryNode', 'DeleteQueryNode', 'MergeQueryNode']);

/**
 * Wraps a dialect so every statement honours the request scope it runs in (see
 * `src/domain/request-scope.ts`). It sits under Kysely, so every transaction is covered whoever
 * opens it: `inTransaction` in the core, the token server's own, any a new surface adds.
 * Outside a request (CLI, jobs) it only forwards.
 */
export function guardedByRequestScope(dialect: Dialect): Dialect {
  return {
    createDriver: (): Driver => new GuardedDriver(dialect.createDriver()),
    createQueryCompiler: (): QueryCompiler => dialect.createQueryCompiler(),
    createAdapter: (): DialectAdapter => dialect.createAdapter(),
    createIntrospector: (db: Kysely<unknown>): DatabaseIntrospector => dialect.createIntrospector(db),
  };
}

class GuardedConnection implements DatabaseConnection {
  inTransaction = false;

  constructor(readonly inner: DatabaseConnection) {}

  async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    const scope = currentRequestScope();
    if (scope === undefined) return this.inner.executeQuery<R>(query);
    // Between statements: an abandoned request's transaction fails here and is rolled back.
    if (this.inTransaction || !WRITES.has(query.query.kind)) {
      scope.throwIfAbandoned();
      return this.inner.executeQuery<R>(query);
    }
    // A lone write commits once sent: while it runs, the request has work that will be durable.
    scope.writeStarted();
    try {
      return await this.inner.executeQuery<R>(query);
    } finally {
      scope.writeEnded();
    }
  }

  streamQuery<R>(query: CompiledQuery, chunkSize?: number): AsyncIterableIterator<QueryResult<R>> {
    currentRequestScope()?.throwIfAbandoned();
    return this.inner.streamQuery<R>(query, chunkSize);
  }
}

class GuardedDriver implements Driver {
  readonly #wrapped = new WeakMap<DatabaseConnection, GuardedConnection>();

  constructor(private readonly inner: Driver) {}

  init(): Promise<void> {
    return this.inner.init();
  }

  async acquireConnection(): Promise<DatabaseConnection> {
    const connection = await this.inner.acquireConnection();
    let guarded = this.#wrapped.get(connection);
    if (guarded === undefined) {
      guarded = new GuardedConnection(connection);
      this.#wrapped.set(connection, guarded);
    }
    return guarded;
  }

  async beginTransaction(connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    currentRequestScope()?.throwIfAbandoned();
    const guarded = connection as GuardedConnection;
    await this.inner.beginTransaction(guarded.inner, settings);
    guarded.inTransaction = true;
  }

  async commitTransaction(connection: DatabaseConnection): Promise<void> {
    const guarded = connection as GuardedConnection;
    // The last check and the COMMIT leave in one tick: no deadline can fall between them.
    currentRequestScope()?.beforeCommit();
    guarded.inTransaction = false;
    await this.inner.commitTransaction(guarded.inner);
  }

  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    const guarded = connection as GuardedConnection;
    guarded.inTransaction = false;
    try {
      await this.inner.rollbackTransaction(guarded.inner);
    } catch (err) {
      // SQLite rolls a transaction back by itself on some errors (disk full, I/O, a read-only file,
      // RAISE(ROLLBACK)); the ROLLBACK that follows then fails, and its error would replace the
      // one that explains the failure in the log. Rolled back is what was asked.
      if (!alreadyRolledBack(err)) throw err;
    }
  }

  async savepoint(
    connection: DatabaseConnection,
    name: string,
    compileQuery: QueryCompiler['compileQuery'],
  ): Promise<void> {
    currentRequestScope()?.throwIfAbandoned();
    await this.required('savepoint').call(
      this.inner,
      (connection as GuardedConnection).inner,
      name,
      compileQuery,
    );
  }

  async rollbackToSavepoint(
    connection: DatabaseConnection,
    name: string,
    compileQuery: QueryCompiler['compileQuery'],
  ): Promise<void> {
    await this.required('rollbackToSavepoint').call(
      this.inner,
      (connection as GuardedConnection).inner,
      name,
      compileQuery,
    );
  }

  async releaseSavepoint(
    connection: DatabaseConnection,
    name: string,
    compileQuery: QueryCompiler['compileQuery'],
  ): Promise<void> {
    currentRequestScope()?.throwIfAbandoned();
    await this.required('releaseSavepoint').call(
      this.inner,
      (connection as GuardedConnection).inner,
      name,
      compileQuery,
    );
  }

  releaseConnection(connection: DatabaseConnection): Promise<void> {
    return this.inner.releaseConnection((connection as GuardedConnection).inner);
  }

  destroy(): Promise<void> {
    return this.inner.destroy();
  }

  private required<K extends 'savepoint' | 'rollbackToSavepoint' | 'releaseSavepoint'>(
    method: K,
  ): NonNullable<Driver[K]> {
    const fn = this.inner[method];
    if (fn === undefined) throw new Error(`The database driver does not support ${method}.`);
    return fn as NonNullable<Driver[K]>;
  }
}

function alreadyRolledBack(err: unknown): boolean {
  return err instanceof Error && /^cannot rollback - no transaction is active$/.test(err.message);
}
