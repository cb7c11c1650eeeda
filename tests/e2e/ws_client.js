// An independent WebSocket client for tests/e2e/test_websocket.py: Node's
// `ws` (Debian's node-ws; run with NODE_PATH where Debian installs it).
//
//   node ws_client.js echo URL SIZE[,SIZE...]
//
// Opens one connection (no permessage-deflate: the python client covers
// that), sends a text and a binary message of each SIZE in turn, waits for
// each echo and compares it byte for byte, pings once and waits for the
// pong, then closes with 1000. Prints one JSON line:
//   {"results": [{"kind", "size", "ok", "got"}...], "pong": bool,
//    "close": [code, reason], "protocol": ...}
// and exits 0, or prints {"error": ...} and exits 1. Bounded: 20 s.

'use strict';

const WebSocket = require('ws');

const [cmd, url, sizesArg] = process.argv.slice(2);
if (cmd !== 'echo' || !url) {
  console.error('usage: ws_client.js echo URL SIZE[,SIZE...]');
  process.exit(2);
}
const sizes = (sizesArg || '').split(',').filter((s) => s !== '').map(Number);

function payload(kind, size) {
  if (kind === 'text') {
    // multi-byte UTF-8 too: 'é' is two bytes; pad to SIZE bytes exactly
    const unit = 'abcé';
    let s = unit.repeat(Math.floor(size / 5));
    while (Buffer.byteLength(s) < size) s += 'x';
    return s;
  }
  const b = Buffer.alloc(size);
  for (let i = 0; i < size; i++) b[i] = (i * 7 + 3) & 0xff;
  return b;
}

const timer = setTimeout(() => {
  console.log(JSON.stringify({ error: 'timed out' }));
  process.exit(1);
}, 20000);

const ws = new WebSocket(url, { perMessageDeflate: false,
                                maxPayload: 64 * 1024 * 1024 });
const out = { results: [], pong: false, close: null };
const plan = [];
for (const size of sizes) {
  plan.push(['text', size]);
  plan.push(['binary', size]);
}
let expect = null;

function next() {
  if (plan.length === 0) {
    ws.ping(Buffer.from('node-ping'));
    return;
  }
  const [kind, size] = plan.shift();
  expect = { kind, size, data: payload(kind, size) };
  ws.send(expect.data, { binary: kind === 'binary' });
}

ws.on('open', () => {
  out.protocol = ws.protocol;
  next();
});
ws.on('message', (data, isBinary) => {
  const e = expect;
  const same = e.kind === 'text'
    ? !isBinary && data.toString('utf8') === e.data
    : isBinary && Buffer.compare(data, e.data) === 0;
  out.results.push({ kind: e.kind, size: e.size, ok: same,
                     got: data.length, binary: isBinary });
  next();
});
ws.on('pong', (data) => {
  out.pong = data.toString() === 'node-ping';
  ws.close(1000, 'node done');
});
ws.on('close', (code, reason) => {
  out.close = [code, reason.toString()];
  clearTimeout(timer);
  console.log(JSON.stringify(out));
  process.exit(0);
});
ws.on('error', (err) => {
  clearTimeout(timer);
  console.log(JSON.stringify({ error: String(err), partial: out }));
  process.exit(1);
});
