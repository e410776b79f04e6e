-- Drive `cad serve` from Neovim (0.7+): start the client, attach it to the current buffer,
-- run `cad.applyEdit` through workspace/executeCommand, let Neovim apply the server's
-- workspace/applyEdit, write the file and quit. Exit status 0 on success, 1 with a message
-- on stderr otherwise.
--
-- Input: the CAD_NVIM_SPEC environment variable, JSON of
--   {"cmd": [...], "settings": {...}, "argument": {...}, "timeout_ms": N}
-- where "argument" is the cad.applyEdit argument without "uri" (the buffer's URI is used).

local spec = vim.fn.json_decode(os.getenv("CAD_NVIM_SPEC"))
local timeout = spec.timeout_ms

local function fail(message)
  io.stderr:write("cad-nvim: " .. message .. "\n")
  vim.cmd("cquit 1")
end

local watchdog = vim.loop.new_timer()
watchdog:start(timeout, 0, vim.schedule_wrap(function()
  fail("timed out after " .. timeout .. " ms")
end))

local bufnr = vim.api.nvim_get_current_buf()
local initialized = false
local client_id = vim.lsp.start_client({
  name = "cad",
  cmd = spec.cmd,
  root_dir = vim.fn.getcwd(),
  init_options = spec.settings,
  on_init = function()
    initialized = true
  end,
})
if not client_id then
  fail("cannot start " .. table.concat(spec.cmd, " "))
  return
end
vim.lsp.buf_attach_client(bufnr, client_id)
if not vim.wait(timeout, function() return initialized end, 20) then
  fail("the server did not initialize")
  return
end

local client = vim.lsp.get_client_by_id(client_id)
local argument = spec.argument
argument.uri = vim.uri_from_bufnr(bufnr)
local answered, failure, result = false, nil, nil
client.request("workspace/executeCommand", {
  command = "cad.applyEdit",
  arguments = { argument },
}, function(err, value)
  answered, failure, result = true, err, value
end, bufnr)
if not vim.wait(timeout, function() return answered end, 20) then
  fail("no answer to cad.applyEdit")
  return
end
if failure then
  fail("cad.applyEdit failed: " .. vim.inspect(failure))
  return
end
if not (result and result.applied) then
  fail("the edit was not applied: " .. vim.inspect(result))
  return
end

vim.cmd("write")
client.stop()
vim.wait(timeout, function() return client.is_stopped() end, 20)
watchdog:stop()
vim.cmd("qall!")
