import assert from 'node:assert/strict';
import { test } from 'node:test';
import { StatusBar, StatusModel } from '../../src/status';
import * as vscode from 'vscode';

const mock = vscode as unknown as typeof import('../mock/vscode');

test('server lifecycle states render distinctly', () => {
  const m = new StatusModel();
  assert.match(m.view().text, /circle-slash/);
  m.setServer('starting');
  assert.equal(m.view().busy, true);
  m.setServer('running');
  assert.equal(m.view().text, '$(zap) MKEvolve');
  m.setServer('restarting', 'crashed once');
  assert.equal(m.view().level, 'warning');
  assert.equal(m.view().tooltip, 'crashed once');
  m.setServer('failed', 'gave up');
  assert.equal(m.view().level, 'error');
  assert.match(m.view().tooltip, /gave up/);
});

test('a job goes begin → report → end and shows title, message and percentage', () => {
  const m = new StatusModel();
  m.setServer('running');
  assert.equal(m.progress('t1', { kind: 'begin', title: 'Evolve conv+relu', percentage: 0, cancellable: true }, 1), true);
  assert.equal(m.view().text, '$(sync~spin) Evolve conv+relu 0%');
  m.progress('t1', { kind: 'report', message: 'step 2/8', percentage: 25 }, 2);
  assert.equal(m.view().text, '$(sync~spin) Evolve conv+relu: step 2/8 25%');
  assert.match(m.view().tooltip, /cancellable/);
  m.progress('t1', { kind: 'end', message: '1.8x vs eager' }, 3);
  assert.equal(m.view().text, '$(zap) MKEvolve');
  assert.match(m.view().tooltip, /Last job: Evolve conv\+relu — 1.8x vs eager/);
});

test('percentages are clamped, rounded and never go back', () => {
  const m = new StatusModel();
  m.setServer('running');
  m.progress(7, { kind: 'begin', title: 'Job', percentage: 150 }, 0);
  assert.equal(m.activeJobs()[0].percentage, 100);
  m.progress(8, { kind: 'begin', title: 'Other', percentage: 10.6 }, 1);
  assert.equal(m.activeJobs()[1].percentage, 11);
  m.progress(8, { kind: 'report', percentage: 5 }, 2);
  assert.equal(m.activeJobs()[1].percentage, 11);
  m.progress(8, { kind: 'report', percentage: Number.NaN }, 3);
  assert.equal(m.activeJobs()[1].percentage, 11);
  // numeric and string tokens are the same job key but keep the raw token
  assert.equal(m.activeJobs()[0].rawToken, 7);
});

test('several jobs: the oldest is shown with a count of the others', () => {
  const m = new StatusModel();
  m.setServer('running');
  m.progress('b', { kind: 'begin', title: 'Second' }, 20);
  m.progress('a', { kind: 'begin', title: 'First' }, 10);
  assert.equal(m.view().text, '$(sync~spin) First (+1)');
  assert.match(m.view().tooltip, /First[\s\S]*Second/);
  m.progress('a', { kind: 'end' }, 30);
  assert.equal(m.view().text, '$(sync~spin) Second');
});

test('out-of-protocol values are ignored; long messages are shortened', () => {
  const m = new StatusModel();
  m.setServer('running');
  assert.equal(m.progress('x', { kind: 'report', percentage: 50 }, 0), false);
  assert.equal(m.progress('x', { kind: 'end' }, 0), false);
  assert.equal(m.activeJobs().length, 0);
  m.progress('y', { kind: 'begin', title: 'Evolve', message: 'x'.repeat(200) }, 0);
  assert.ok(m.view().text.length < 80);
  assert.ok(m.view().text.includes('…'));
});

test('jobs vanish when the server stops or restarts', () => {
  const m = new StatusModel();
  m.setServer('running');
  m.progress('j', { kind: 'begin', title: 'Evolve all' }, 0);
  m.setServer('restarting', 'crash');
  m.setServer('running');
  assert.equal(m.activeJobs().length, 0);
  assert.equal(m.progress('j', { kind: 'end' }, 1), false);
});

test('StatusBar drives a real status bar item', () => {
  const bar = new StatusBar('mkevolve.showJobs');
  const item = mock.created.statusBarItems[mock.created.statusBarItems.length - 1];
  assert.equal(item.visible, true);
  assert.equal(item.command, 'mkevolve.showJobs');
  bar.setServer('running');
  bar.progress('t', { kind: 'begin', title: 'Decompose', percentage: 40 });
  assert.equal(item.text, '$(sync~spin) Decompose 40%');
  bar.setServer('failed', 'nope');
  assert.equal((item.backgroundColor as { id: string }).id, 'statusBarItem.errorBackground');
  bar.setServer('restarting');
  assert.equal((item.backgroundColor as { id: string }).id, 'statusBarItem.warningBackground');
  bar.setServer('running');
  assert.equal(item.backgroundColor, undefined);
  bar.dispose();
  assert.equal(item.disposed, true);
});
