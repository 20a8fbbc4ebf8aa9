-- mkevolve.nvim — starts `mkevolve lsp` for Python buffers and exposes the
-- server's actions as user commands. Works on Neovim 0.7 (vim.lsp.start_client)
-- and 0.8+ (vim.lsp.start). Progress ($/progress) is shown in the command line.
--
--   require('mkevolve').setup{
--     cmd = { 'mkevolve', 'lsp', '--stdio' },   -- server command
--     -- Server settings (docs/lsp.md, "Settings"): anything left out is the
--     -- engine's default, the same as `mkevolve evolve` / `check` use.
--     settings = { backend = 'cpu', proposer = 'builtin', debounceMs = 400,
--                  -- the kernels' language (builtin or LLM): 'triton', 'cuda' (CUDA C++
--                  -- where it can, else PyTorch) or 'auto' (both compete), as --backend
--                  kernelBackend = 'triton',
--                  -- candidates per evolve run, all subkernels together
--                  budget = { proposals = 64 },
--                  beam = { width = 4, depth = 2 },  -- the search's beam
--                  tolerance = { atol = 1e-4, rtol = 1e-4 }, trials = 5,
--                  -- seconds a capture / a verification job may run before
--                  -- its worker is killed (an import-time hang, a slow kernel)
--                  timeout = { capture = 60, verify = 300 } },
--     filetypes = { 'python' },
--     progress = true,                           -- echo progress messages
--     codelens = true,                           -- show the server's code lenses
--   }
--
-- Commands: :MkDecompose :MkEvolve :MkEvolveAll :MkSwap :MkRestore
-- :MkEditVariant (code actions at the cursor, picked by title), :MkActions
-- (all of them), :MkEvolveCancel (cancels running jobs), :MkReport (opens
-- the report). :MkEditVariant opens the subkernel's edit file; saving it
-- verifies that subkernel alone (diagnostics on the edit file).
local M = {}

local defaults = {
  cmd = { 'mkevolve', 'lsp', '--stdio' },
  settings = {}, -- nothing set: the server applies the engine's defaults
  filetypes = { 'python' },
  progress = true,
  codelens = true,
  root_markers = { '.git', 'pyproject.toml', 'setup.py' },
}

M.config = vim.deepcopy(defaults)
M.client_id = nil
M.progress_log = {} -- every $/progress value received, newest last (tests read it)
M.active = {}       -- token -> title of progresses begun and not ended

local function root_dir(bufname)
  local dir = vim.fn.fnamemodify(bufname, ':p:h')
  for _, marker in ipairs(M.config.root_markers) do
    local found = vim.fn.finddir(marker, dir .. ';')
    if found == '' then found = vim.fn.findfile(marker, dir .. ';') end
    if found ~= '' then return vim.fn.fnamemodify(found, ':p:h:h') end
  end
  return dir
end

local function on_progress(err, result, ctx)
  if err or not result or not result.value then return end
  local v = result.value
  table.insert(M.progress_log, v)
  if v.kind == 'begin' then
    M.active[result.token] = v.title or 'mkevolve'
  elseif v.kind == 'end' then
    M.active[result.token] = nil
  end
  if not M.config.progress then return end
  local parts = { 'mkevolve:' }
  if v.title then table.insert(parts, v.title) end
  if v.message then table.insert(parts, v.message) end
  if v.percentage then table.insert(parts, string.format('(%d%%)', v.percentage)) end
  if v.kind == 'end' then table.insert(parts, '— done') end
  vim.api.nvim_echo({ { table.concat(parts, ' ') } }, false, {})
end

local function client_config(bufnr)
  local handlers = {
    ['textDocument/publishDiagnostics'] = function(err, result, ctx, config)
      vim.lsp.diagnostic.on_publish_diagnostics(err, result, ctx, config)
      M.diagnostics_received = (M.diagnostics_received or 0) + 1
      -- results changed: lenses follow the diagnostics
      if M.config.codelens and vim.lsp.codelens and result and result.uri then
        local buf = vim.uri_to_bufnr(result.uri)
        if vim.api.nvim_buf_is_loaded(buf) then
          pcall(vim.lsp.codelens.refresh)
        end
      end
    end,
    ['$/progress'] = function(err, result, ctx)
      on_progress(err, result, ctx)
      -- keep Neovim's own progress bookkeeping (statusline plugins use it)
      local default = vim.lsp.handlers['$/progress']
      if default then pcall(default, err, result, ctx) end
    end,
  }
  return {
    name = 'mkevolve',
    cmd = M.config.cmd,
    root_dir = root_dir(vim.api.nvim_buf_get_name(bufnr)),
    init_options = M.config.settings,
    settings = { mkevolve = M.config.settings },
    handlers = handlers,
  }
end

--- Starts (or reuses) the client and attaches it to bufnr.
function M.attach(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  local conf = client_config(bufnr)
  if vim.lsp.start then
    M.client_id = vim.lsp.start(conf, { bufnr = bufnr })
    return M.client_id
  end
  if not M.client_id or not vim.lsp.get_client_by_id(M.client_id) then
    M.client_id = vim.lsp.start_client(conf)
  end
  if M.client_id then vim.lsp.buf_attach_client(bufnr, M.client_id) end
  return M.client_id
end

local function client()
  return M.client_id and vim.lsp.get_client_by_id(M.client_id) or nil
end

--- Code actions at the cursor whose title matches `pattern` (a Lua pattern).
--- Calls cb(list) with the server's actions; synchronous when cb is nil.
function M.actions(pattern, cb)
  local c = client()
  if not c then
    vim.notify('mkevolve: server not running', vim.log.levels.WARN)
    return {}
  end
  local params = vim.lsp.util.make_range_params()
  params.context = { diagnostics = vim.lsp.diagnostic.get_line_diagnostics() }
  local function filter(result)
    local out = {}
    for _, a in ipairs(result or {}) do
      if not pattern or (a.title or ''):match(pattern) then table.insert(out, a) end
    end
    return out
  end
  if cb then
    c.request('textDocument/codeAction', params, function(err, result)
      cb(err and {} or filter(result))
    end, 0)
    return nil
  end
  local resp = c.request_sync('textDocument/codeAction', params, 5000, 0)
  return filter(resp and resp.result)
end

--- Runs an action (CodeAction or Command) through workspace/executeCommand.
function M.run(action)
  local c = client()
  if not c or not action then return end
  local cmd = action.command
  local name, args = nil, nil
  if type(cmd) == 'table' then
    name, args = cmd.command, cmd.arguments
  elseif type(cmd) == 'string' then
    name, args = cmd, action.arguments
  end
  if not name then return end
  M.execute(name, args)
end

--- Sends workspace/executeCommand; a result naming a URI (the report, an
--- edit file) is opened in a split unless a window shows it already (the
--- server's window/showDocument). on_done(err, result) is optional.
function M.execute(name, args, on_done)
  local c = client()
  if not c then return end
  c.request('workspace/executeCommand', { command = name, arguments = args },
    function(err, result)
      if err then
        if err.code ~= -32800 then -- RequestCancelled: the user asked for it
          vim.notify('mkevolve: ' .. (err.message or 'failed'), vim.log.levels.ERROR)
        end
      elseif type(result) == 'table' and type(result.uri) == 'string' then
        local fname = vim.uri_to_fname(result.uri)
        if vim.fn.bufwinid(vim.fn.bufnr(fname)) == -1 then
          vim.cmd('split ' .. vim.fn.fnameescape(fname))
        end
      end
      if on_done then on_done(err, result) end
    end, 0)
end

--- Picks among actions matching `pattern` (vim.ui.select) and runs one.
function M.pick(pattern)
  M.actions(pattern, function(list)
    if #list == 0 then
      vim.notify('mkevolve: no matching action here', vim.log.levels.INFO)
      return
    end
    if #list == 1 then return M.run(list[1]) end
    vim.ui.select(list, { prompt = 'mkevolve', format_item = function(a) return a.title end },
      function(choice) if choice then M.run(choice) end end)
  end)
end

local commands = {
  MkDecompose = '^Decompose',
  MkEvolve = '^Evolve subkernel',
  MkEvolveAll = '^Evolve all',
  MkSwap = '^Swap subkernel',
  MkRestore = '^Restore PyTorch reference',
  MkEditVariant = '^Edit subkernel',
}

function M.setup(opts)
  M.config = vim.tbl_deep_extend('force', vim.deepcopy(defaults), opts or {})
  local group = vim.api.nvim_create_augroup('mkevolve', { clear = true })
  vim.api.nvim_create_autocmd('FileType', {
    group = group,
    pattern = M.config.filetypes,
    callback = function(args) M.attach(args.buf) end,
  })
  for name, pattern in pairs(commands) do
    vim.api.nvim_create_user_command(name, function() M.pick(pattern) end, {})
  end
  vim.api.nvim_create_user_command('MkActions', function() M.pick(nil) end, {})
  vim.api.nvim_create_user_command('MkReport', function()
    M.execute('mkevolve.openReport', { { uri = vim.uri_from_bufnr(0) } })
  end, {})
  if M.config.codelens and vim.lsp.codelens then
    vim.api.nvim_create_autocmd({ 'BufEnter', 'InsertLeave', 'BufWritePost' }, {
      group = group,
      callback = function(args)
        if vim.tbl_contains(M.config.filetypes, vim.bo[args.buf].filetype) and client() then
          pcall(vim.lsp.codelens.refresh)
        end
      end,
    })
  end
  vim.api.nvim_create_user_command('MkEvolveCancel', function()
    -- cancels every cancellable mkevolve progress the server has open
    local c = client()
    if not c then return end
    for token, _ in pairs(M.active) do
      c.notify('window/workDoneProgress/cancel', { token = token })
    end
  end, {})
  -- buffers already open when setup runs
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(buf) and vim.tbl_contains(M.config.filetypes, vim.bo[buf].filetype) then
      M.attach(buf)
    end
  end
end

return M
