-- End-to-end with the engine: a real Neovim (headless) runs mkevolve.nvim
-- against the real server, which captures the module in a Python worker
-- and evolves it on CPU with the builtin proposer (Triton interpreter).
-- Environment: MKEVOLVE_BIN, MK_E2E_FILE (a copy of examples/conv_bias_relu.py
-- we may edit), MK_REPO_DIR. Exits 0 when every check passed, 1 otherwise.
local failures = {}
local t0 = vim.loop.hrtime()
local function check(cond, what)
  if not cond then table.insert(failures, what) end
  io.stdout:write(string.format('%s %6.1fs %s\n', cond and 'ok  ' or 'FAIL',
    (vim.loop.hrtime() - t0) / 1e9, what))
end
local function finish()
  if #failures > 0 then vim.cmd('cquit 1') else vim.cmd('qall!') end
end

local repo = os.getenv('MK_REPO_DIR')
vim.opt.runtimepath:prepend(repo .. '/editors/nvim')
vim.cmd('filetype on')
-- headless: pick the first entry instead of prompting
vim.ui.select = function(items, _, on_choice) on_choice(items[1], 1) end
local messages = {}
vim.lsp.handlers['window/showMessage'] = function(_, result)
  table.insert(messages, result.message)
end
local mk = require('mkevolve')
mk.setup({
  cmd = { os.getenv('MKEVOLVE_BIN'), 'lsp', '--stdio' },
  settings = { backend = 'cpu', proposer = 'builtin', budget = { proposals = 4 },
    tolerance = { atol = 1e-4, rtol = 1e-4 }, debounceMs = 50 },
  progress = false,
})

local file = os.getenv('MK_E2E_FILE')
local composed = file:gsub('%.py$', '_new.py')
vim.cmd('edit ' .. vim.fn.fnameescape(file))
local buf = vim.api.nvim_get_current_buf()

local function diags(code)
  local out = {}
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    local c = d.code or (d.user_data and d.user_data.lsp and d.user_data.lsp.code)
    if code == nil or c == code then table.insert(out, d) end
  end
  return out
end
local function client() return mk.client_id and vim.lsp.get_client_by_id(mk.client_id) end
local function line_of(pat)
  for i, l in ipairs(vim.api.nvim_buf_get_lines(buf, 0, -1, false)) do
    if l:find(pat, 1, true) then return i end
  end
end
local function wait(ms, cond) return vim.wait(ms, cond, 100) end
local function progress_since(n, title_pat)
  local begun, ended, pcts = false, false, {}
  for i = n + 1, #mk.progress_log do
    local v = mk.progress_log[i]
    if v.kind == 'begin' and (v.title or ''):match(title_pat) then begun = true
    elseif begun and v.kind == 'report' and v.percentage then table.insert(pcts, v.percentage)
    elseif begun and v.kind == 'end' then ended = true; return begun, ended, pcts, v.message end
  end
  return begun, ended, pcts
end

check(wait(10000, function() return client() ~= nil and #vim.lsp.buf_get_clients(buf) > 0 end),
  'server started and attached')

-- 1. Analysis: a capture in a Python worker, then one diagnostic per subkernel.
local conv = line_of('x = self.conv(x)')
check(conv ~= nil, 'module has the conv statement')
check(wait(90000, function() return #diags('subkernel-unverified') > 0 end),
  'subkernel diagnostics after the capture')
local d = diags('subkernel-unverified')[1]
if d then
  check(d.lnum == conv - 1, 'subkernel diagnostic starts on the conv line')
  check(d.message:match('not yet verified') ~= nil, 'says not yet verified: ' .. d.message)
end
check(#diags() == #diags('subkernel-unverified'), 'nothing else reported on a valid problem')
local cpu_note = false
for _, m in ipairs(messages) do cpu_note = cpu_note or m:match('correctness only, on CPU') ~= nil end
check(cpu_note, 'told once that there is no GPU (correctness only, on CPU)')

-- 2. Hover: a markdown table of the subkernel's variants.
vim.api.nvim_win_set_cursor(0, { conv, 10 })
local c = client()
local hover = c.request_sync('textDocument/hover', vim.lsp.util.make_position_params(), 5000, buf)
local hv = hover and hover.result and hover.result.contents and hover.result.contents.value or ''
check(hv:match('| variant |') ~= nil and hv:match('|%-%-%-|') ~= nil, 'hover shows a variants table')

-- 3. Decompose: the composed ModelNew beside the module.
check(#mk.actions('^Decompose') == 1, 'a Decompose action at the conv line')
vim.cmd('MkDecompose')
check(wait(30000, function()
  local f = io.open(composed)
  if not f then return false end
  local text = f:read('*a')
  f:close()
  return text:match('class ModelNew') ~= nil
end), 'decompose wrote ' .. composed)
check(wait(10000, function()
  local w = diags('subkernel-unverified')[1]
  return w ~= nil and w.severity == vim.diagnostic.severity.WARN
end), 'after decompose an unverified subkernel is a warning')

-- 4. Evolve all: a background job with progress, then verified diagnostics.
vim.api.nvim_set_current_buf(buf)
vim.api.nvim_win_set_cursor(0, { conv, 10 })
local n = #mk.progress_log
vim.cmd('MkEvolveAll')
check(wait(10000, function() return (progress_since(n, '^Evolve all')) end), 'evolve all began a progress')
local hover_ms
do -- hover is answered while the job runs, from memory
  local h0 = vim.loop.hrtime()
  local r = c.request_sync('textDocument/hover', vim.lsp.util.make_position_params(), 2000, buf)
  hover_ms = (vim.loop.hrtime() - h0) / 1e6
  check(r ~= nil and r.err == nil, string.format('hover answered during the job (%.1f ms)', hover_ms))
end
check(wait(240000, function() local _, e = progress_since(n, '^Evolve all'); return e end),
  'evolve all ended')
local _, _, pcts, endmsg = progress_since(n, '^Evolve all')
check(#pcts > 0, 'progress reported percentages (' .. table.concat(pcts, ',') .. ')')
local mono = true
for i = 2, #pcts do mono = mono and pcts[i] >= pcts[i - 1] end
check(mono, 'percentages never go back')
check(endmsg == 'done', 'the job ended done (' .. tostring(endmsg) .. ')')
check(wait(10000, function() return #diags('subkernel-verified') > 0 end), 'a verified subkernel diagnostic')
d = diags('subkernel-verified')[1]
if d then
  check(d.severity == vim.diagnostic.severity.INFO, 'verified is information')
  check(d.message:match('verified %d+/%d+') ~= nil, 'says verified n/n: ' .. d.message)
end

-- 5. Swap to another verified variant, then restore the PyTorch reference.
vim.api.nvim_win_set_cursor(0, { conv, 10 })
local swaps = mk.actions('^Swap subkernel')
check(#swaps > 0, #swaps .. ' swap action(s), one per verified variant')
if #swaps > 0 then
  local variant = swaps[1].title:match('→ ([%w_]+)')
  vim.cmd('MkSwap')
  check(wait(15000, function()
    local v = diags('subkernel-verified')[1]
    return v ~= nil and variant ~= nil and v.message:find(variant, 1, true) ~= nil
  end), 'swapped to ' .. tostring(variant))
end
vim.api.nvim_win_set_cursor(0, { conv, 10 })
check(#mk.actions('^Restore PyTorch reference') == 1, 'a Restore action')
vim.cmd('MkRestore')
check(wait(15000, function() return #diags('subkernel-reference') > 0 end),
  'restored: the subkernel runs the PyTorch reference')
local f = io.open(composed)
local ctext = f and f:read('*a') or ''
if f then f:close() end
check(ctext:match('class ModelNew') ~= nil, 'the composed file is kept up to date')

-- 5b. :MkEditVariant opens the subkernel's edit file; opening and saving it
-- verifies that subkernel alone, with the verdict on the edit file.
local module_win = vim.api.nvim_get_current_win()
local relu0 = line_of('return torch.relu(x - 0.1)')
vim.api.nvim_win_set_cursor(0, { relu0, 10 })
vim.cmd('MkEditVariant')
local ebuf
check(wait(30000, function()
  for _, w in ipairs(vim.api.nvim_list_wins()) do
    local b = vim.api.nvim_win_get_buf(w)
    if vim.api.nvim_buf_get_name(b):match('/%.mkevolve/.*/edit/.*%.py$') then ebuf = b; return true end
  end
  return false
end), 'the edit file is open in a window')
if ebuf then
  local function edit_diags(code)
    local out = {}
    for _, x in ipairs(vim.diagnostic.get(ebuf)) do
      local c = x.code or (x.user_data and x.user_data.lsp and x.user_data.lsp.code)
      if c == code then table.insert(out, x) end
    end
    return out
  end
  vim.api.nvim_set_current_win(vim.fn.bufwinid(ebuf))
  vim.cmd('write')
  check(wait(90000, function() return #edit_diags('edit-verified') > 0 end),
    'saving the edit file verifies it (edit-verified on the edit file)')
  local v = edit_diags('edit-verified')[1]
  check(v ~= nil and v.lnum == 0 and v.message:match('^verified') ~= nil,
    'the verdict is at line 1: ' .. tostring(v and v.message))
  vim.api.nvim_set_current_win(module_win)
end

-- 6. Edit + save: re-analysis of the new text, and a stale job is cancelled.
local relu = line_of('return torch.relu(x - 0.1)')
vim.api.nvim_buf_set_lines(buf, relu - 1, relu, false, { '        return torch.relu(x - 0.2)' })
vim.cmd('write')
check(wait(90000, function()
  local w = diags('subkernel-unverified')[1]
  return w ~= nil and #diags('subkernel-verified') == 0
end), 'after edit + save the new code is analysed again (not yet verified)')
n = #mk.progress_log
vim.api.nvim_win_set_cursor(0, { conv, 10 })
vim.cmd('MkEvolveAll')
check(wait(10000, function() return (progress_since(n, '^Evolve all')) end), 'second evolve began')
vim.cmd('MkEvolveCancel')
check(wait(30000, function() local _, e = progress_since(n, '^Evolve all'); return e end),
  'cancelled evolve ended promptly')
local _, _, _, m2 = progress_since(n, '^Evolve all')
check(m2 == 'cancelled', 'progress says cancelled (' .. tostring(m2) .. ')')

-- 7. Clean shutdown.
local exited
c = client()
if c then
  c.stop()
  exited = wait(15000, function() return c.is_stopped() end)
end
check(exited == true, 'server stopped on request')
finish()
