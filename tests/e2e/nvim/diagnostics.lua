-- End-to-end: a real Neovim (headless) runs mkevolve.nvim against the real
-- server on a KernelBench problem. Environment: MKEVOLVE_BIN (server),
-- MK_E2E_FILE (a copy of the problem we may edit), MK_REPO_DIR.
-- Exits 0 when every check passed, 1 otherwise (with the reasons printed).
local failures = {}
local function check(cond, what)
  if not cond then table.insert(failures, what) end
  io.stdout:write((cond and 'ok   ' or 'FAIL ') .. what .. '\n')
end
local function finish()
  if #failures > 0 then vim.cmd('cquit 1') else vim.cmd('qall!') end
end

local repo = os.getenv('MK_REPO_DIR')
vim.opt.runtimepath:prepend(repo .. '/editors/nvim')
vim.cmd('filetype on')
local mk = require('mkevolve')
mk.setup({ cmd = { os.getenv('MKEVOLVE_BIN'), 'lsp', '--stdio' }, settings = { debounceMs = 50 },
  progress = false })

local file = os.getenv('MK_E2E_FILE')
vim.cmd('edit ' .. vim.fn.fnameescape(file))
local buf = vim.api.nvim_get_current_buf()

local function by_code(code)
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    local c = d.code or (d.user_data and d.user_data.lsp and d.user_data.lsp.code)
    if c == code then return d end
  end
end

local function client()
  return mk.client_id and vim.lsp.get_client_by_id(mk.client_id)
end

check(vim.wait(10000, function()
  local c = client()
  return c ~= nil and c.initialized ~= false and #vim.lsp.buf_get_clients(buf) > 0
end, 50), 'server started and attached')

-- A well-formed problem: the server analyses it and finds nothing wrong.
local ok = vim.wait(5000, function()
  return client() and client().server_capabilities ~= nil
end, 50)
check(ok, 'initialize answered')
-- Problems are errors and warnings; the engine's per-subkernel notes on
-- an untouched module are hints (tests/e2e/nvim/engine.lua covers them).
local function problems()
  local out = {}
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    if d.severity <= vim.diagnostic.severity.WARN then table.insert(out, d) end
  end
  return out
end
vim.wait(1000, function() return false end, 50) -- let the first analysis land
check(#problems() == 0, 'no problems reported on a valid KernelBench problem')

-- Rename get_inputs: an error diagnostic on the Model line.
local lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
local gi, model_line
for i, l in ipairs(lines) do
  if l:match('^def get_inputs') then gi = i end
  if l:match('^class Model') then model_line = i end
end
check(gi ~= nil and model_line ~= nil, 'problem has get_inputs and class Model')
vim.api.nvim_buf_set_lines(buf, gi - 1, gi, false, { 'def make_inputs():' })
check(vim.wait(5000, function() return by_code('missing-get-inputs') ~= nil end, 20),
  'missing get_inputs reported after an edit (incremental sync)')
local d = by_code('missing-get-inputs')
if d then
  check(d.lnum == model_line - 1, 'diagnostic on the class Model line')
  check(d.severity == vim.diagnostic.severity.ERROR, 'diagnostic is an error')
end

-- A syntax error with a multi-byte character before it (UTF-16 columns).
vim.api.nvim_buf_set_lines(buf, 0, 0, false, { 's = "é😀" + (' })
check(vim.wait(5000, function() return by_code('syntax') ~= nil end, 20), 'syntax error reported')

-- Restore and save: re-analysis on save clears everything.
vim.api.nvim_buf_set_lines(buf, 0, 1, false, {})
vim.api.nvim_buf_set_lines(buf, gi - 1, gi, false, { 'def get_inputs():' })
vim.cmd('write')
check(vim.wait(5000, function() return #problems() == 0 end, 20),
  'problems cleared after fixing and saving')

-- Hover answers (null without engine results) and code actions answer.
local c = client()
local hover = c and c.request_sync('textDocument/hover', vim.lsp.util.make_position_params(), 3000, buf)
check(hover ~= nil and hover.err == nil, 'hover answered')
local acts = c and c.request_sync('textDocument/codeAction', {
  textDocument = { uri = vim.uri_from_bufnr(buf) },
  range = { start = { line = 0, character = 0 }, ['end'] = { line = 0, character = 0 } },
  context = { diagnostics = {} } }, 3000, buf)
check(acts ~= nil and acts.err == nil, 'codeAction answered')

-- Clean shutdown: shutdown + exit, the server process exits 0.
local exited
if c then
  local on_exit = c.config.on_exit
  c.stop()
  exited = vim.wait(5000, function() return c.is_stopped() end, 50)
end
check(exited == true, 'server stopped on request')
finish()
