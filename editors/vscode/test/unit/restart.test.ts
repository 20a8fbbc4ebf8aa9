import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RestartPolicy } from '../../src/restart';

test('restarts up to the limit inside the window, with growing delays', () => {
  const p = new RestartPolicy(3, 60_000);
  const d1 = p.onCrash(0);
  const d2 = p.onCrash(1_000);
  const d3 = p.onCrash(2_000);
  const d4 = p.onCrash(3_000);
  assert.deepEqual([d1.restart, d2.restart, d3.restart, d4.restart], [true, true, true, false]);
  assert.ok(d1.delayMs < d2.delayMs && d2.delayMs < d3.delayMs);
  assert.equal(d4.crashes, 4);
  assert.match(d4.message, /4 times in the last 60 s/);
  assert.match(d4.message, /maxRestarts = 3/);
});

test('crashes older than the window are forgotten', () => {
  const p = new RestartPolicy(2, 10_000);
  assert.equal(p.onCrash(0).restart, true);
  assert.equal(p.onCrash(1_000).restart, true);
  // 20 s later the two earlier crashes are out of the window.
  const d = p.onCrash(21_000);
  assert.equal(d.restart, true);
  assert.equal(d.crashes, 1);
  assert.equal(d.delayMs, 500);
});

test('backoff is capped', () => {
  const p = new RestartPolicy(100, 1e9, 500, 4000);
  let last = 0;
  for (let i = 0; i < 20; i++) last = p.onCrash(i).delayMs;
  assert.equal(last, 4000);
});

test('zero restarts allowed means never restart; reset and configure apply', () => {
  const p = new RestartPolicy(0, 60_000);
  assert.equal(p.onCrash(0).restart, false);
  p.reset();
  p.configure(1, 60_000);
  assert.equal(p.onCrash(1).restart, true);
  assert.equal(p.onCrash(2).restart, false);
  p.reset();
  assert.equal(p.onCrash(3).restart, true);
});
