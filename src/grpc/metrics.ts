import { Counter, Histogram, type Registry } from 'prom-client';

export interface GrpcMetrics {
  started: Counter<'grpc_service' | 'grpc_method' | 'grpc_type'>;
  handled: Counter<'grpc_service' | 'grpc_method' | 'grpc_type' | 'grpc_code'>;
  seconds: Histogram<'grpc_service' | 'grpc_method' | 'grpc_type'>;
}

/**
 * Per-call metrics with the names and labels of go-grpc-prometheus (what gRPC dashboards expect),
 * prefixed like the rest of Atrium's, in the registry the HTTP `/metrics` endpoint serves.
 */
export function grpcMetrics(registry: Registry): GrpcMetrics {
  const existing = registry.getSingleMetric('atrium_grpc_server_started_total');
  if (existing) {
    // Tests may build several servers on one set of services; metrics are registered once.
    return {
      started: existing as GrpcMetrics['started'],
      handled: registry.getSingleMetric('atrium_grpc_server_handled_total') as GrpcMetrics['handled'],
      seconds: registry.getSingleMetric('atrium_grpc_server_handling_seconds') as GrpcMetrics['seconds'],
    };
  }
  return {
    started: new Counter({
      name: 'atrium_grpc_server_started_total',
      help: 'gRPC calls started, by service, method and type',
      labelNames: ['grpc_service', 'grpc_method', 'grpc_type'],
      registers: [registry],
    }),
    handled: new Counter({
      name: 'atrium_grpc_server_handled_total',
      help: 'gRPC calls completed, by service, method, type and status code',
      labelNames: ['grpc_service', 'grpc_method', 'grpc_type', 'grpc_code'],
      registers: [registry],
    }),
    seconds: new Histogram({
      name: 'atrium_grpc_server_handling_seconds',
      help: 'gRPC call duration until the status is sent, by service, method and type',
      labelNames: ['grpc_service', 'grpc_method', 'grpc_type'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 60, 300],
      registers: [registry],
    }),
  };
}
