/**
 * The gRPC baseline: a bare grpc-js server answering GetUser with one constant User from memory,
 * through the same generated codecs Atrium uses, with no store, no credentials, no logging and no
 * metrics. Atrium's GetUser figure is reported as a ratio against this.
 */
import { Server, ServerCredentials } from '@grpc/grpc-js';
import { UserServiceService, type User, type UserServiceServer } from '../src/grpc/gen/users/v1/users.gen.js';

const user = JSON.parse(process.env.BASELINE_USER ?? '{}') as User;
const server = new Server();
const refuse = { code: 12, details: 'not in the baseline' };
const handlers: UserServiceServer = {
  getUser: (_call, callback) => callback(null, user),
  listUsers: (call) => call.emit('error', refuse),
  updateUser: (_call, callback) => callback(refuse),
  streamUserActivity: (call) => call.emit('error', refuse),
};
server.addService(UserServiceService, handlers);
server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, port) => {
  if (err) throw err;
  process.stdout.write(`${JSON.stringify({ grpc: `127.0.0.1:${port}` })}\n`);
});
process.on('SIGTERM', () => server.tryShutdown(() => process.exit(0)));
