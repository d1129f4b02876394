/** A request's whole body, for the local endpoints (local/s3-server.ts, local/dynamodb-proxy.ts). */
import type http from 'node:http';

export function readBody(req: http.IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
    req.on('close', () => {
      if (!req.complete) reject(new Error('client went away before the body was complete'));
    });
  });
}
