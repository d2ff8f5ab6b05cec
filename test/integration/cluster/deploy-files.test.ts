import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { instanceBodyLimit } from '../../../src/cluster/cluster.js';
import { DEFAULT_LAYOUT, planLayout } from '../../../src/cluster/layout.js';
import {
  CLIENT_TIMEOUT_S,
  COMPOSE_SITE,
  nginxBodyLimit,
  OUT_OF_ROTATION_DIR,
  renderNginxMain,
  renderNginxSite,
} from '../../../src/cluster/nginx-config.js';
import { bodyLimitBytesFrom, ConfigError, parseConfig } from '../../../src/config/schema.js';
import { root } from '../../helpers/cli.js';
import { locationBodyLimits, NGINX, ON_CI, serverBodyLimits } from './support.js';

const read = (path: string) => readFileSync(join(root, path), 'utf8');
const MiB = 1024 * 1024;

describe('deploy/: what containers run is what the cluster runs', () => {
  it('deploy/nginx/atrium.conf is the rendered configuration (npm run cluster renders the same)', () => {
    expect(read('deploy/nginx/atrium.conf')).toBe(renderNginxSite(COMPOSE_SITE));
  });

  it('compose.yaml runs the reference layout: 2 api, 1 auth, 1 grpc, 2 worker, migrations first', () => {
    const compose = read('deploy/compose.yaml');
    for (const [role, count] of Object.entries(DEFAULT_LAYOUT)) {
      const lines = compose.match(
        new RegExp(
          `^  ${role}-\\d+: \\{ <<: \\*atrium, command: \\["serve", "--role", "${role}"\\] \\}$`,
          'gm',
        ),
      );
      expect(lines, role).toHaveLength(count);
    }
    expect(compose).toContain('command: ["migrate"]');
    expect(compose).toContain('migrate: { condition: service_completed_successfully }');
    expect(compose).toContain('TRUST_PROXY: "1"');
    const upstreams = COMPOSE_SITE.api.length + COMPOSE_SITE.auth.length + COMPOSE_SITE.grpc.length;
    expect(upstreams).toBe(DEFAULT_LAYOUT.api + DEFAULT_LAYOUT.auth + DEFAULT_LAYOUT.grpc);
    expect(read('deploy/Dockerfile')).toMatch(/ENTRYPOINT \["node", "bin\/atrium.js"\]/);
  });

  it('routes each surface as the issue asks: keep-alive, WebSocket upgrade, unbuffered SSE, h2c gRPC', () => {
    const conf = renderNginxSite(COMPOSE_SITE);
    // Kept-alive HTTP/1.1 upstreams for api and auth, closed by nginx after 1 s idle (shorter than
    // an instance's drain); none for gRPC (nginx-config.ts says why). api's two upstreams without
    // one instance (out of rotation) keep alive too: 4 in all.
    expect(conf.match(/keepalive 32;\n {4}keepalive_timeout 1s;/g)).toHaveLength(4);
    expect(conf).toMatch(/upstream atrium_grpc \{[^}]*\}/);
    expect(conf.match(/upstream atrium_grpc \{[^}]*\}/)![0]).not.toContain('keepalive');
    expect(conf).toContain('lingering_close always;');
    // A stalled client is let go in 10 s (nginx's default is 60 s), in the HTTP server only: a gRPC
    // client stream may rightly pause longer between messages.
    const [httpServer, grpcServer] = conf.split(/\n(?=server \{)/).slice(1) as [string, string];
    expect(httpServer).toContain(
      `    client_header_timeout ${CLIENT_TIMEOUT_S}s;\n    client_body_timeout ${CLIENT_TIMEOUT_S}s;\n`,
    );
    expect(CLIENT_TIMEOUT_S).toBe(10);
    expect(grpcServer).not.toMatch(/client_(header|body)_timeout/);
    expect(conf).toMatch(
      /location = \/graphql \{[^}]*proxy_set_header Upgrade \$http_upgrade;[^}]*Connection \$atrium_connection;/,
    );
    expect(conf).toMatch(/location \/graphql\/stream \{[^}]*proxy_buffering off;/);
    expect(conf).toMatch(/listen 8081 http2;[\s\S]*grpc_pass grpc:\/\/\$atrium_grpc;/);
    expect(conf).toMatch(/location \/oauth\/ \{[^}]*proxy_pass http:\/\/\$atrium_auth;/);
    expect(conf).toContain('proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;');
    expect(conf).toContain('proxy_next_upstream error timeout;');
    expect(conf).not.toContain('http_503');
    expect(conf).not.toContain('non_idempotent');
  });

  it('takes an instance out of rotation by a file, without a reload: an upstream without each one', () => {
    const conf = renderNginxSite(COMPOSE_SITE);
    expect(conf.match(/upstream atrium_api_out_1 \{[^}]*\}/)![0]).toContain('server api-2:3000 ');
    expect(conf.match(/upstream atrium_api_out_1 \{[^}]*\}/)![0]).not.toContain('api-1');
    expect(conf.match(/upstream atrium_api_out_2 \{[^}]*\}/)![0]).not.toContain('api-2');
    expect(conf).toContain(
      `    if (-f ${OUT_OF_ROTATION_DIR}/api-1:3000) {\n        set $atrium_api atrium_api_out_1;\n    }`,
    );
    expect(conf).toContain(
      `    if (-f ${OUT_OF_ROTATION_DIR}/api-2:3000) {\n        set $atrium_api atrium_api_out_2;\n    }`,
    );
    // One instance: nowhere else to send its requests, so no file can take it out.
    expect(conf).not.toContain('atrium_auth_out');
    expect(conf).not.toContain('atrium_grpc_out');
    expect(conf).not.toMatch(/ down;/);
  });

  it("answers its own errors in each surface's shape: no request can reach nginx's HTML page", () => {
    const conf = renderNginxSite(COMPOSE_SITE);
    // Not 408: nginx never answers one (it closes the connection), so a page for it is never used.
    const statuses = [400, 404, 413, 414, 494, 500, 502, 503, 504];
    const blocks = conf.split(/\n(?=server \{)/).slice(1);
    const [http, grpcServer] = blocks as [string, string];
    // Server-level pages for everything that fails before a location is chosen (REST's shape).
    for (const s of statuses)
      expect(http).toMatch(new RegExp(`\\n {4}error_page ${s} = /_atrium/error/rest/`));
    // Each location that sets its own error_page loses the server's: it must set all of them.
    const surfaces: [string, string][] = [
      ['location /oauth/', 'oauth'],
      ['location = /authorize', 'page'],
      ['location /.well-known/', 'oauth'],
      ['location = /graphql', 'graphql'],
      ['location /graphql/stream', 'graphql'],
    ];
    for (const [location, surface] of surfaces) {
      const block = http.slice(http.indexOf(`${location} {`)).split('\n    }')[0]!;
      for (const s of statuses)
        expect(block, location).toContain(`error_page ${s} = /_atrium/error/${surface}/`);
    }
    for (const s of statuses)
      expect(grpcServer).toMatch(new RegExp(`error_page ${s} = /_atrium/error/grpc/`));
    // gRPC: trailers-only (200, application/grpc, the status in headers), UNAVAILABLE for 502.
    expect(grpcServer).toMatch(
      /location = \/_atrium\/error\/grpc\/502 \{[^}]*default_type "application\/grpc";[^}]*grpc-status "14"[^}]*return 200;/,
    );
    expect(grpcServer).toMatch(/location = \/_atrium\/error\/grpc\/413 \{[^}]*grpc-status "8"/);
    // The id in the pages is the one forwarded to the instances.
    expect(conf).toContain('proxy_set_header X-Request-Id $atrium_request_id;');
    expect(conf).toContain('grpc_set_header X-Request-Id $atrium_request_id;');
    expect(conf).not.toMatch(/@atrium/);
    expect(conf).not.toMatch(/error_page 408 /);
    expect(read('deploy/nginx/atrium.conf')).toContain('error_page 502 = /_atrium/error/rest/502;');
  });

  it("sets the HTTP server's body limit above the instances' BODY_LIMIT_BYTES, from the same value, and none for gRPC", () => {
    // compose.yaml's instances run with the BODY_LIMIT_BYTES it sets, or the default; atrium.conf
    // (COMPOSE_SITE) is rendered for that value.
    const composeValue = /^\s*BODY_LIMIT_BYTES:\s*"?(\d+)"?\s*$/m.exec(read('deploy/compose.yaml'))?.[1];
    const composeLimit = parseConfig(
      composeValue === undefined ? {} : { BODY_LIMIT_BYTES: composeValue },
    ).bodyLimitBytes;
    expect(COMPOSE_SITE.bodyLimitBytes).toBe(composeLimit);
    const deployed = read('deploy/nginx/atrium.conf');
    // One limit per server: the HTTP server's backstop, and 0 (no limit) in the gRPC server, whose
    // instance limits each message (nginx could only count a client stream's sum, and cut it with a
    // bare reset). None in a location that could undercut them: the only others are 0 (no limit)
    // in the gRPC error pages, which must read past a refused body to answer.
    expect(serverBodyLimits(deployed)).toEqual([[nginxBodyLimit(composeLimit)], [0]]);
    const [httpLocations, grpcLocations] = locationBodyLimits(deployed);
    expect(httpLocations).toEqual([]);
    expect(grpcLocations!.length).toBeGreaterThan(0);
    expect(grpcLocations!.filter((n) => n !== 0)).toEqual([]);
    // Above Atrium's limit: the instance is the one to refuse, in the surface's shape.
    expect(nginxBodyLimit(composeLimit)).toBe(composeLimit + MiB);
    // The comments say why the numbers are what they are, quoting the value they were rendered for.
    expect(deployed).toContain(`BODY_LIMIT_BYTES (${composeLimit})`);
    expect(deployed.match(/BODY_LIMIT_BYTES \(\d+\)/g)).toHaveLength(2);
    // Another value moves the HTTP server's limit with it.
    expect(serverBodyLimits(renderNginxSite({ ...COMPOSE_SITE, bodyLimitBytes: 3 * MiB }))).toEqual([
      [4 * MiB],
      [0],
    ]);
  });

  it('atrium cluster reads BODY_LIMIT_BYTES as its instances do, and refuses a bad one naming it', () => {
    expect(bodyLimitBytesFrom({})).toBe(parseConfig({}).bodyLimitBytes);
    // The environment wins over a .env file, as in the instances.
    expect(instanceBodyLimit({ BODY_LIMIT_BYTES: '3145728' })).toBe(3 * MiB);
    expect(() => instanceBodyLimit({ BODY_LIMIT_BYTES: '2mb' })).toThrow(ConfigError);
    expect(() => instanceBodyLimit({ BODY_LIMIT_BYTES: '0' })).toThrow(/^BODY_LIMIT_BYTES: /);
  });

  it.skipIf(!NGINX && !ON_CI)('nginx itself accepts the configuration `atrium cluster` writes', () => {
    const dir = mkdtempSync(join(tmpdir(), 'atrium-nginx-t-'));
    try {
      const specs = planLayout(DEFAULT_LAYOUT, 4000);
      const at = (p: number) => `127.0.0.1:${p}`;
      const conf = join(dir, 'nginx.conf');
      writeFileSync(
        conf,
        renderNginxMain(
          {
            httpListen: at(18080),
            grpcListen: at(18081),
            api: specs.filter((s) => s.role === 'api').map((s) => at(s.port)),
            auth: specs.filter((s) => s.role === 'auth').map((s) => at(s.port)),
            grpc: specs.filter((s) => s.role === 'grpc').map((s) => at(s.grpcPort)),
            bodyLimitBytes: 3 * MiB,
          },
          dir,
        ),
      );
      const out = execFileSync(
        NGINX ?? 'nginx',
        ['-t', '-p', dir, '-c', conf, '-e', join(dir, 'error.log')],
        {
          encoding: 'utf8',
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      expect(out).toBe('');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
