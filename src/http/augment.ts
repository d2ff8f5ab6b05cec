// Brings @fastify/swagger's route-schema fields (hide, tags, summary, security) into scope for every route file.
import type {} from '@fastify/swagger';
