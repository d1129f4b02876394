/** Request bodies for the local endpoints (lib/local/s3-server.ts, lib/local/dynamodb-proxy.ts). */
import type http from 'node:http';

/** A request's whole body; rejects if the client goes away before it is complete. */
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

/**
 * Decode an `aws-chunked` body (SigV4 streaming: what @aws-sdk/client-s3 sends for a stream body): hex-sized chunks,
 * each `<size>[;chunk-signature=…]\r\n<bytes>\r\n`, a zero-sized last chunk, then optional trailer lines
 * `name:value` (where the SDK sends its x-amz-checksum-*). Chunk signatures are not checked.
 * @returns the payload and the trailers (names in lower case), or undefined if the body is malformed or cut short
 */
export function decodeAwsChunked(raw: Buffer): { body: Buffer; trailers: Record<string, string> } | undefined {
  const parts: Buffer[] = [];
  let pos = 0;
  for (;;) {
    const eol = raw.indexOf('\r\n', pos);
    if (eol < 0) return undefined;
    const sizeText = raw.toString('latin1', pos, eol).split(';')[0].trim();
    if (!/^[0-9a-fA-F]+$/.test(sizeText)) return undefined;
    const size = parseInt(sizeText, 16);
    pos = eol + 2;
    if (size === 0) break;
    if (pos + size + 2 > raw.length || raw.toString('latin1', pos + size, pos + size + 2) !== '\r\n') return undefined;
    parts.push(raw.subarray(pos, pos + size));
    pos += size + 2;
  }
  const trailers: Record<string, string> = {};
  for (const line of raw.toString('latin1', pos).split('\r\n')) {
    const colon = line.indexOf(':');
    if (colon > 0) trailers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { body: Buffer.concat(parts), trailers };
}
