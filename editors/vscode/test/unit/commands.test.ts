import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SERVER_COMMANDS, SERVER_COMMAND_IDS, actionsFor, needsDocument, paletteArgument, reportUri } from '../../src/commands';

test('the server command ids are the documented ones', () => {
  assert.deepEqual([...SERVER_COMMAND_IDS].sort(), [
    'mkevolve.decompose',
    'mkevolve.editVariant',
    'mkevolve.evolve',
    'mkevolve.evolveAll',
    'mkevolve.openReport',
    'mkevolve.restore',
    'mkevolve.swap',
  ]);
});

test('palette arguments: position only for subkernel commands', () => {
  const uri = 'file:///w/m.py';
  const pos = { line: 3, character: 7 };
  assert.deepEqual(paletteArgument(SERVER_COMMANDS.evolve, uri, pos), { uri, position: pos });
  assert.deepEqual(paletteArgument(SERVER_COMMANDS.restore, uri, pos), { uri, position: pos });
  assert.deepEqual(paletteArgument(SERVER_COMMANDS.decompose, uri, pos), { uri });
  assert.deepEqual(paletteArgument(SERVER_COMMANDS.evolveAll, uri, pos), { uri });
  assert.deepEqual(paletteArgument(SERVER_COMMANDS.openReport, undefined, undefined), {});
  assert.equal(needsDocument(SERVER_COMMANDS.openReport), false);
  assert.equal(needsDocument(SERVER_COMMANDS.swap), true);
  assert.deepEqual(paletteArgument(SERVER_COMMANDS.editVariant, uri, pos), { uri, position: pos });
});

test('report results: string or {uri}, anything else is ignored', () => {
  assert.equal(reportUri('file:///r/report.html'), 'file:///r/report.html');
  assert.equal(reportUri({ uri: 'file:///r/report.md', title: 'x' }), 'file:///r/report.md');
  assert.equal(reportUri(null), undefined);
  assert.equal(reportUri({ uri: 42 }), undefined);
  assert.equal(reportUri('not a uri'), undefined);
});

test('code actions and bare commands that run a given command are picked in order', () => {
  const actions = [
    { title: 'Swap → tl_64x64 (1.6x)', command: { command: 'mkevolve.swap', arguments: [{ v: 1 }] } },
    { title: 'Evolve subkernel', command: { command: 'mkevolve.evolve', arguments: [{ s: 'k0' }] } },
    { title: 'Swap → tl_128 (1.2x)', command: 'mkevolve.swap', arguments: [{ v: 2 }] },
    { title: 'Quick fix', edit: {} },
  ];
  const swaps = actionsFor('mkevolve.swap', actions);
  assert.deepEqual(
    swaps.map((s) => [s.title, s.command, s.arguments]),
    [
      ['Swap → tl_64x64 (1.6x)', 'mkevolve.swap', [{ v: 1 }]],
      ['Swap → tl_128 (1.2x)', 'mkevolve.swap', [{ v: 2 }]],
    ],
  );
  assert.equal(actionsFor('mkevolve.restore', actions).length, 0);
});

test('actions are found by their issue-6 title when the server uses other ids', () => {
  const actions = [
    { title: 'Swap subkernel conv → tile_64 (1.6x)', command: { command: 'engine.swap', arguments: ['sk0', 'v3'] } },
    { title: 'Evolve all', command: 'engine.evolveAll', arguments: ['file:///m.py'] },
    { title: 'Evolve subkernel conv+relu', command: { command: 'engine.evolve', arguments: ['sk0'] } },
    { title: 'Decompose into subkernels', edit: {} }, // no command: not runnable through executeCommand
  ];
  assert.deepEqual(
    actionsFor('mkevolve.swap', actions).map((a) => [a.command, a.arguments]),
    [['engine.swap', ['sk0', 'v3']]],
  );
  assert.deepEqual(actionsFor('mkevolve.evolveAll', actions).map((a) => a.command), ['engine.evolveAll']);
  assert.deepEqual(actionsFor('mkevolve.evolve', actions).map((a) => a.command), ['engine.evolve']);
  assert.deepEqual(actionsFor('mkevolve.decompose', actions), []);
  const edit = [{ title: 'Edit subkernel conv (variant reference)', command: { command: 'engine.edit', arguments: [{ subkernel: 0 }] } }];
  assert.deepEqual(actionsFor('mkevolve.editVariant', edit).map((a) => a.command), ['engine.edit']);
  // An id match wins over title matches.
  const mixed = [...actions, { title: 'Other', command: { command: 'mkevolve.swap', arguments: [] } }];
  assert.deepEqual(actionsFor('mkevolve.swap', mixed).map((a) => a.title), ['Other']);
});
