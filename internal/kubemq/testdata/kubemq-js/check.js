// kubemq-js 1.2.3 against skipq's KubeMQ endpoint: node check.js ADDRESS TOKEN.
// Prints OK or throws. Its quirks: bodies are Buffers (a string body is
// taken as base64) and no tags (its serializer throws on them).
'use strict';
const assert = require('assert');
const { QueuesClient } = require('kubemq-js');

const [address, authToken] = process.argv.slice(2);
const q = new QueuesClient({ address, clientId: 'js-client', authToken });
const body = (s) => Buffer.from(s);
const text = (b) => Buffer.from(b).toString();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// transactionMessages runs transaction() once: the message the callback
// got (null when none) and the error it reported, after the server ended
// the call.
async function transactionOnce(request, settle) {
  let got = null;
  let error = null;
  await q.transaction(request, async (err, msg) => {
    if (err) { error = err; return; }
    if (!msg) return;
    got = msg;
    await settle(msg);
  });
  return { got, error };
}

async function main() {
  const info = await q.ping();
  assert.match(info.version, /^2\.\d+\.\d+$/);
  assert.ok(info.serverStartTime <= Date.now() / 1000, 'ServerStartTime is in seconds');

  const t0 = Date.now();
  const sent = await q.send({ channel: 'js', body: body('hello'), metadata: 'm' });
  const t1 = Date.now();
  assert.equal(sent.isError, false, sent.error);
  assert.ok(sent.id);
  assert.ok(sent.sentAt >= (t0 - 1000) * 1e6 && sent.sentAt <= (t1 + 1000) * 1e6, `sentAt ${sent.sentAt} in ns`);
  assert.equal(sent.expirationAt, 0);
  assert.equal(sent.delayedTo, 0);

  const batch = await q.batch([
    { channel: 'js', body: body('b1') },
    { channel: 'bad channel', body: body('x') },
    { channel: 'js', body: body('b2') },
  ]);
  assert.deepEqual(batch.map((r) => r.isError), [false, true, false]);
  assert.match(batch[1].error, /^Error 120/);

  const peek1 = await q.peek({ channel: 'js', maxNumberOfMessages: 10, waitTimeoutSeconds: 1 });
  const peek2 = await q.peek({ channel: 'js', maxNumberOfMessages: 10, waitTimeoutSeconds: 1 });
  assert.equal(peek1.messages.length, 3);
  assert.deepEqual(peek2.messages.map((m) => m.id), peek1.messages.map((m) => m.id));

  const pulled = await q.pull({ channel: 'js', maxNumberOfMessages: 10, waitTimeoutSeconds: 1 });
  assert.equal(pulled.isError, false, pulled.error);
  assert.equal(pulled.messagesReceived, 3);
  assert.deepEqual(pulled.messages.map((m) => text(m.body)), ['hello', 'b1', 'b2']);
  assert.equal(pulled.messages[0].metadata, 'm');
  let last = 0;
  for (const m of pulled.messages) {
    assert.ok(m.attributes.sequence > last, 'sequences increase');
    last = m.attributes.sequence;
    assert.equal(m.attributes.receiveCount, 1);
    assert.ok(m.attributes.timestamp >= (t0 - 1000) * 1e6, 'timestamp in ns');
  }
  assert.equal((await q.pull({ channel: 'js', maxNumberOfMessages: 10, waitTimeoutSeconds: 1 })).messages.length, 0);

  const tooMany = await q.pull({ channel: 'js', maxNumberOfMessages: 1025, waitTimeoutSeconds: 1 });
  assert.equal(tooMany.isError, true);
  assert.match(tooMany.error, /^Error 122/);

  for (let i = 0; i < 4; i++) await q.send({ channel: 'js-all', body: body(`a${i}`) });
  const all = await q.ackAll({ channel: 'js-all', waitTimeoutSeconds: 1 });
  assert.equal(all.isError, false, all.error);
  assert.equal(all.affectedMessages, 4);
  assert.equal((await q.pull({ channel: 'js-all', maxNumberOfMessages: 10, waitTimeoutSeconds: 1 })).messages.length, 0);
  const badWait = await q.ackAll({ channel: 'js-all', waitTimeoutSeconds: 3601 });
  assert.match(badWait.error, /^Error 136/);

  // transaction: nothing there answers Error 138 and the call ends.
  let r = await transactionOnce({ channel: 'js-tx', waitTimeoutSeconds: 1, visibilitySeconds: 10 }, async () => {});
  assert.equal(r.got, null);
  assert.match(r.error.message, /^Error 138/);

  // ack ends the call; the message is gone.
  await q.send({ channel: 'js-tx', body: body('t1') });
  r = await transactionOnce({ channel: 'js-tx', waitTimeoutSeconds: 1, visibilitySeconds: 10 }, (m) => m.ack());
  assert.equal(text(r.got.message.body), 't1');
  assert.equal((await q.peek({ channel: 'js-tx', maxNumberOfMessages: 10, waitTimeoutSeconds: 1 })).messages.length, 0);

  // reject: redelivered with receiveCount 2; extendVisibility then
  // resendToChannel moves it.
  await q.send({ channel: 'js-tx', body: body('t2') });
  await transactionOnce({ channel: 'js-tx', waitTimeoutSeconds: 1, visibilitySeconds: 10 }, (m) => m.reject());
  r = await transactionOnce({ channel: 'js-tx', waitTimeoutSeconds: 1, visibilitySeconds: 10 }, async (m) => {
    await m.extendVisibility(20);
    await sleep(100);
    await m.resendToChannel('js-moved');
  });
  assert.equal(r.got.message.attributes.receiveCount, 2);
  const moved = await q.pull({ channel: 'js-moved', maxNumberOfMessages: 10, waitTimeoutSeconds: 1 });
  assert.deepEqual(moved.messages.map((m) => text(m.body)), ['t2']);
  assert.equal(moved.messages[0].attributes.reRouted, true);
  assert.equal(moved.messages[0].attributes.reRoutedFromQueue, 'js-tx');

  // resendNewMessage sends a new message and removes the original.
  await q.send({ channel: 'js-tx', body: body('t3') });
  await transactionOnce({ channel: 'js-tx', waitTimeoutSeconds: 1, visibilitySeconds: 10 },
    (m) => m.resendNewMessage({ channel: 'js-new', body: body('t3 again') }));
  assert.deepEqual((await q.pull({ channel: 'js-new', maxNumberOfMessages: 10, waitTimeoutSeconds: 1 })).messages.map((m) => text(m.body)), ['t3 again']);
  assert.equal((await q.peek({ channel: 'js-tx', maxNumberOfMessages: 10, waitTimeoutSeconds: 1 })).messages.length, 0);

  // transactionStream loops one call per message: each delivered once.
  for (let i = 0; i < 3; i++) await q.send({ channel: 'js-stream', body: body(`s${i}`) });
  const seen = [];
  const sub = await q.transactionStream({ channel: 'js-stream', waitTimeoutSeconds: 1, visibilitySeconds: 10 }, (err, m) => {
    if (err || !m) return;
    seen.push(text(m.message.body));
    m.ack();
  });
  for (let i = 0; i < 100 && seen.length < 3; i++) await sleep(100);
  sub.unsubscribe();
  await sleep(1500);
  assert.deepEqual(seen, ['s0', 's1', 's2']);
  assert.equal((await q.peek({ channel: 'js-stream', maxNumberOfMessages: 10, waitTimeoutSeconds: 1 })).messages.length, 0);

  // The DLQ tutorial of docs/KUBEMQ.md, as written there.
  await q.send({
    channel: 'orders', body: body('order 42'),
    policy: { maxReceiveCount: 3, maxReceiveQueue: 'orders.dlq' },
  });
  for (let round = 1; round <= 3; round++) {
    r = await transactionOnce({ channel: 'orders', waitTimeoutSeconds: 1, visibilitySeconds: 30 }, (m) => m.reject());
    assert.equal(r.got.message.attributes.receiveCount, round);
  }
  assert.equal((await q.pull({ channel: 'orders', maxNumberOfMessages: 10, waitTimeoutSeconds: 1 })).messages.length, 0);
  const dead = await q.pull({ channel: 'orders.dlq', maxNumberOfMessages: 10, waitTimeoutSeconds: 1 });
  assert.equal(dead.messages.length, 1);
  assert.equal(text(dead.messages[0].body), 'order 42');
  assert.equal(dead.messages[0].attributes.reRouted, true);
  assert.equal(dead.messages[0].attributes.reRoutedFromQueue, 'orders');

  q.close();
  console.log('OK');
}

main().catch((e) => { console.error(e); process.exit(1); });
