// @aws-sdk/client-s3 (JavaScript SDK v3) as a command-line client for the integration suite.
// Usage: node node_driver.cjs ENDPOINT AK SK PART_MB OP ARGS...
// The SDK is resolved from $OBJDIRECT_NODE_MODULES (scripts/bootstrap installs it into
// <repo>/build/node/node_modules). Exit 0 on success; on an S3 error prints
// 'ERROR <http status> <code> <message>' to stderr and exits 3.
'use strict';
const path = require('node:path');
const fs = require('node:fs');
const crypto = require('node:crypto');
const { pipeline } = require('node:stream/promises');

const nm = process.env.OBJDIRECT_NODE_MODULES;
const need = (name) => require(require.resolve(name, { paths: [nm, path.join(nm, '@aws-sdk', 'client-s3')] }));
const S3 = need('@aws-sdk/client-s3');
const { Upload } = need('@aws-sdk/lib-storage');
const { SignatureV4 } = need('@smithy/signature-v4');

class Sha256 {
  constructor(secret) { this.h = secret ? crypto.createHmac('sha256', secret) : crypto.createHash('sha256'); }
  update(d) { this.h.update(typeof d === 'string' ? Buffer.from(d) : d); }
  async digest() { return new Uint8Array(this.h.digest()); }
}

const escape = (s) => encodeURIComponent(s).replace(/[!'()*]/g, (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase());

async function main() {
  const [ep, ak, sk, partMb, op, ...args] = process.argv.slice(2);
  const part = Number(partMb) * 1048576;
  const credentials = { accessKeyId: ak, secretAccessKey: sk };
  const s3 = new S3.S3Client({ endpoint: ep, region: 'us-east-1', forcePathStyle: true, maxAttempts: 1, credentials });
  switch (op) {
    case 'create-bucket':
      await s3.send(new S3.CreateBucketCommand({ Bucket: args[0] }));
      break;
    case 'upload': {
      const [src, b, k] = args;
      await new Upload({ client: s3, partSize: part, queueSize: 4, leavePartsOnError: false,
                         params: { Bucket: b, Key: k, Body: fs.createReadStream(src) } }).done();
      break;
    }
    case 'download': {
      const [b, k, dst] = args;
      const r = await s3.send(new S3.GetObjectCommand({ Bucket: b, Key: k }));
      await pipeline(r.Body, fs.createWriteStream(dst));
      break;
    }
    case 'list': {
      const sizes = {};
      let token;
      do {
        const r = await s3.send(new S3.ListObjectsV2Command({ Bucket: args[0], ContinuationToken: token }));
        for (const o of r.Contents || []) sizes[o.Key] = o.Size;
        token = r.IsTruncated ? r.NextContinuationToken : undefined;
      } while (token);
      console.log(JSON.stringify(sizes));
      break;
    }
    case 'range': {
      const [b, k, first, last, dst] = args;
      const r = await s3.send(new S3.GetObjectCommand({ Bucket: b, Key: k, Range: `bytes=${first}-${last}` }));
      if (r.$metadata.httpStatusCode !== 206) throw new Error(`range GET status ${r.$metadata.httpStatusCode}`);
      fs.writeFileSync(dst, Buffer.from(await r.Body.transformToByteArray()));
      break;
    }
    case 'presign': {
      // What @aws-sdk/s3-request-presigner does, with the SDK's own SigV4 signer.
      const [method, b, k] = args;
      const u = new URL(ep);
      const p = '/' + escape(b) + '/' + k.split('/').map(escape).join('/');
      const signer = new SignatureV4({ service: 's3', region: 'us-east-1', credentials, sha256: Sha256,
                                       uriEscapePath: false, applyChecksum: false });
      const req = { method, protocol: u.protocol, hostname: u.hostname, port: Number(u.port), path: p,
                    query: {}, headers: { host: u.host, 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD' } };
      const signed = await signer.presign(req, { expiresIn: 600 });
      const qs = Object.entries(signed.query).map(([n, v]) => `${escape(n)}=${escape(v)}`).join('&');
      console.log(`${u.protocol}//${u.host}${p}?${qs}`);
      break;
    }
    case 'put-if-none-match': {
      const [src, b, k] = args;
      await s3.send(new S3.PutObjectCommand({ Bucket: b, Key: k, Body: fs.readFileSync(src), IfNoneMatch: '*' }));
      break;
    }
    case 'delete-objects': {
      const [b, ...keys] = args;
      const r = await s3.send(new S3.DeleteObjectsCommand({ Bucket: b, Delete: { Objects: keys.map((Key) => ({ Key })) } }));
      if ((r.Errors || []).length) throw new Error('DeleteObjects errors: ' + JSON.stringify(r.Errors));
      const got = (r.Deleted || []).map((d) => d.Key).sort();
      if (JSON.stringify(got) !== JSON.stringify([...keys].sort())) throw new Error('Deleted: ' + JSON.stringify(got));
      break;
    }
    case 'copy': {
      const [b, src, dst] = args;
      const source = '/' + b + '/' + src.split('/').map(escape).join('/');
      await s3.send(new S3.CopyObjectCommand({ Bucket: b, Key: dst, CopySource: source }));
      break;
    }
    case 'delete':
      await s3.send(new S3.DeleteObjectCommand({ Bucket: args[0], Key: args[1] }));
      break;
    case 'delete-bucket':
      await s3.send(new S3.DeleteBucketCommand({ Bucket: args[0] }));
      break;
    default:
      throw new Error('unknown op ' + op);
  }
}

main().catch((e) => {
  const st = e && e.$metadata ? e.$metadata.httpStatusCode : '';
  console.error(`ERROR ${st} ${e && e.name} ${e && e.message}`);
  process.exit(3);
});
