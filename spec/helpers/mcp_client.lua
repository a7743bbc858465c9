-- mcp_client: drive a real build/luamcp process from a busted spec, the way
-- an MCP client would: newline-delimited JSON over its stdin and stdout.
--
--   local client = require "mcp_client"
--   local server = client.spawn { "run", "spec/fixtures/kitchen" }
--   server:initialize()
--   local response = server:request("tools/call", { name = "add", arguments = { a = 1, b = 2 } })
--   server:close()

local uv = require "luv"
local cjson = require "cjson"
local reaper = require "reaper"

local M = {}

M.LUAMCP = os.getenv("LUAMCP") or "build/luamcp"
-- How long a wait for something that should come (a response, a line, an
-- exit) lasts by default: long enough for a loaded 2-core machine running
-- the ASan build. A wait returns as soon as its event happens, so a
-- generous bound costs nothing when all is well.
M.DEFAULT_TIMEOUT_MS = 30000

--- Run the event loop until pred() is true or timeout_ms passes.
---@return boolean true if pred() became true
function M.wait_until(pred, timeout_ms)
  timeout_ms = timeout_ms or M.DEFAULT_TIMEOUT_MS
  if pred() then return true end
  uv.update_time()
  local deadline = uv.now() + timeout_ms
  local timer = uv.new_timer()
  -- Repeating, so that the loop can never wait for I/O without a timer:
  -- a callback that runs a nested wait (a write's or a timer's, before
  -- uv_run polls) may consume this timer's single expiry, and the outer
  -- uv.run("once") would then block in epoll_wait(-1) for good.
  timer:start(math.max(1, math.ceil(timeout_ms)), 100, function() end)
  local ok = false
  while true do
    uv.run("once")
    if pred() then ok = true break end
    uv.update_time()
    if uv.now() >= deadline then break end
  end
  timer:stop()
  timer:close()
  uv.run("nowait") -- let the close complete: a handle left closing crashes luv at exit
  return ok
end

--- Check pred() every interval_ms (default 50) until it is true or
--- timeout_ms passes, for what no event announces (a process leaving
--- /proc, a file appearing). The loop keeps running meanwhile.
---@return boolean true if pred() became true
function M.poll_until(pred, timeout_ms, interval_ms)
  uv.update_time()
  local deadline = uv.now() + (timeout_ms or M.DEFAULT_TIMEOUT_MS)
  while true do
    if pred() then return true end
    uv.update_time()
    if uv.now() >= deadline then return false end
    M.wait_until(function() return false end, interval_ms or 50)
  end
end

--- Pause for ms milliseconds while still running the loop (output keeps
--- being collected).
function M.sleep(ms)
  M.wait_until(function() return false end, ms)
end

--- How many times needle (plain text) occurs in text.
function M.count(text, needle)
  local n, at = 0, 1
  while true do
    local i, j = text:find(needle, at, true)
    if not i then return n end
    n, at = n + 1, j + 1
  end
end

local Process = {}
Process.__index = Process

--- Start luamcp with args (a list). opts: env (list of "K=V"), cwd,
--- stdin_file (a path opened as the child's stdin instead of a pipe), bin,
--- unread_stderr (a pipe that nobody reads: allowed by the MCP spec).
function M.spawn(args, opts)
  opts = opts or {}
  local self = setmetatable({
    lines = {}, buffer = "", stderr = "", next_id = 1, notifications = {}, requests = {},
    exited = false, stdout_closed = false,
  }, Process)
  local stdin_target
  if opts.stdin_file then
    self.stdin_fd = assert(uv.fs_open(opts.stdin_file, "r", 0))
    stdin_target = self.stdin_fd
  else
    self.stdin = uv.new_pipe(false)
    stdin_target = self.stdin
  end
  self.stdout = uv.new_pipe(false)
  self.stderr_pipe = uv.new_pipe(false)
  self.started_at = uv.hrtime()
  local handle, pid_or_err = uv.spawn(opts.bin or M.LUAMCP, {
    args = args, cwd = opts.cwd, env = opts.env,
    stdio = { stdin_target, self.stdout, self.stderr_pipe },
  }, function(code, signal)
    self.exited = true
    self.exit_code = code
    self.exit_signal = signal
    self.exited_at = uv.hrtime()
  end)
  if not handle then
    -- No process (a program that is not there): free the pipes first, as a
    -- handle left open crashes luv at exit and hides this error.
    for _, h in pairs { self.stdin or false, self.stdout, self.stderr_pipe } do
      if h then h:close() end
    end
    if self.stdin_fd then uv.fs_close(self.stdin_fd) end
    uv.run("nowait")
    error(("cannot start %s: %s"):format(opts.bin or M.LUAMCP, tostring(pid_or_err)), 2)
  end
  self.handle, self.pid = handle, pid_or_err
  reaper.track(self) -- stopped when its test, block or file is over, if the spec did not
  if self.stdin_fd then uv.fs_close(self.stdin_fd) end
  self.stdout:read_start(function(err, data)
    assert(not err, err)
    if not data then
      self.stdout_closed = true
      return
    end
    self.buffer = self.buffer .. data
    while true do
      local nl = self.buffer:find("\n", 1, true)
      if not nl then break end
      self.lines[#self.lines + 1] = self.buffer:sub(1, nl - 1)
      self.buffer = self.buffer:sub(nl + 1)
    end
  end)
  if not opts.unread_stderr then
    self.stderr_pipe:read_start(function(err, data)
      if data then self.stderr = self.stderr .. data end
    end)
  end
  return self
end

--- Write one line (a string, sent as is, or a table, JSON-encoded).
function Process:send(message)
  local line = type(message) == "table" and cjson.encode(message) or message
  self.stdin:write(line .. "\n")
end

--- Write raw bytes (no newline added).
function Process:write(bytes)
  self.stdin:write(bytes)
end

--- The next output line, or nil after timeout_ms.
function Process:read_line(timeout_ms)
  if not M.wait_until(function() return #self.lines > 0 end, timeout_ms) then return nil end
  return table.remove(self.lines, 1)
end

--- The next message decoded, and its raw line; nil on timeout.
function Process:read(timeout_ms)
  local line = self:read_line(timeout_ms)
  if not line then return nil end
  return cjson.decode(line), line
end

--- True if nothing arrives within ms.
function Process:silent_for(ms)
  return self:read_line(ms) == nil
end

--- Wait until the process's stderr holds needle (plain text) at least n
--- times (default 1): how a spec waits for what the server, or a fixture
--- tool with io.stderr:write, announces there (a call started, a call
--- ended, a debug log line). Returns true if it did within timeout_ms.
function Process:wait_stderr(needle, n, timeout_ms)
  return M.wait_until(function() return M.count(self.stderr, needle) >= (n or 1) end, timeout_ms)
end

--- Send a request and wait for its response. Notifications and requests
--- from the server that arrive meanwhile are kept in self.notifications and
--- self.requests. Returns the decoded response and its raw line.
function Process:request(method, params, timeout_ms)
  local id = self.next_id
  self.next_id = id + 1
  self:send({ jsonrpc = "2.0", id = id, method = method, params = params })
  return self:await_response(id, timeout_ms)
end

--- Wait for the response with this id. Concurrent requests may be
--- answered in any order: a response read while another was awaited waits
--- in self.other (nil when none does) until it is awaited in turn.
function Process:await_response(id, timeout_ms)
  for i, msg in ipairs(self.other or {}) do
    if msg.id == id then
      table.remove(self.other, i)
      local line = table.remove(self.other_lines, i)
      if #self.other == 0 then self.other, self.other_lines = nil, nil end
      return msg, line
    end
  end
  local deadline_ms = timeout_ms or M.DEFAULT_TIMEOUT_MS
  local start = uv.hrtime()
  while true do
    local remaining = deadline_ms - (uv.hrtime() - start) / 1e6
    if remaining <= 0 then return nil end
    local msg, line = self:read(remaining)
    if not msg then return nil end
    if msg.method and msg.id == nil then
      self.notifications[#self.notifications + 1] = msg
    elseif msg.method then
      self.requests[#self.requests + 1] = msg
    elseif msg.id == id then
      return msg, line
    else
      self.other, self.other_lines = self.other or {}, self.other_lines or {}
      self.other[#self.other + 1] = msg
      self.other_lines[#self.other_lines + 1] = line
    end
  end
end

--- Notifications received so far with this method.
function Process:notifications_named(method)
  local out = {}
  for _, n in ipairs(self.notifications) do
    if n.method == method then out[#out + 1] = n end
  end
  return out
end

--- Send a notification.
function Process:notify(method, params)
  self:send({ jsonrpc = "2.0", method = method, params = params })
end

--- initialize + notifications/initialized. Returns the initialize result.
function Process:initialize(version, capabilities)
  local response = self:request("initialize", {
    protocolVersion = version or "2025-11-25",
    capabilities = capabilities or {},
    clientInfo = { name = "busted", version = "1.0" },
  })
  assert(response and response.result, "initialize failed: " .. cjson.encode(response or {}) .. "\n" .. self.stderr)
  self:notify("notifications/initialized")
  return response.result
end

--- The result of a tools/call, asserting there was no JSON-RPC error.
function Process:call_tool(name, arguments, meta)
  local params = { name = name, arguments = arguments, _meta = meta }
  local response = self:request("tools/call", params)
  assert(response, "no response to tools/call " .. name .. "\n" .. self.stderr)
  assert(response.result, "tools/call " .. name .. " failed: " .. cjson.encode(response))
  return response.result
end

--- Close stdin (EOF) and wait for the process to exit. Returns the exit
--- code, or nil if it did not exit within timeout_ms.
function Process:close_stdin()
  if self.stdin and not self.stdin:is_closing() then self.stdin:close() end
end

--- Waits for the exit at least DEFAULT_TIMEOUT_MS whatever timeout_ms says:
--- an exit is always awaited, never a check that the process keeps running.
function Process:wait_exit(timeout_ms)
  M.wait_until(function() return self.exited end, math.max(timeout_ms or 0, M.DEFAULT_TIMEOUT_MS))
  return self.exit_code, self.exit_signal
end

--- End the process (EOF, then SIGKILL if it lingers) and free handles.
function Process:close()
  self:close_stdin()
  if not self:wait_exit(M.DEFAULT_TIMEOUT_MS) and not self.exited then
    self.handle:kill("sigkill")
    self:wait_exit(1000)
  end
  for _, h in ipairs { self.stdout, self.stderr_pipe, self.handle } do
    if h and not h:is_closing() then h:close() end
  end
  uv.run("nowait")
  return self.exit_code
end

function Process:kill(signal)
  self.handle:kill(signal or "sigterm")
end

--- SIGTERM, wait up to grace_ms for the exit, SIGKILL if it lingers, and
--- free the handles. Returns the exit code and the signal that ended it.
function Process:terminate(grace_ms)
  if not self.exited then
    self:kill("sigterm")
    -- Not wait_exit: the grace is what the caller says.
    M.wait_until(function() return self.exited end, grace_ms or M.DEFAULT_TIMEOUT_MS)
  end
  if not self.exited then
    self.handle:kill("sigkill")
    self:wait_exit(1000)
  end
  self:close()
  return self.exit_code, self.exit_signal
end

--- Read the whole of a file.
function M.read_file(path)
  local f = assert(io.open(path, "rb"))
  local data = f:read("a")
  f:close()
  return data
end

--- Run a shell command to its end: exit code, stdout, stderr.
function M.sh(command)
  local err_path = os.tmpname()
  local p = io.popen(command .. " 2>" .. err_path)
  local out = p:read("a")
  local _, _, code = p:close()
  local err = M.read_file(err_path)
  os.remove(err_path)
  return code, out, err
end

--- A fresh temporary directory (removed by remove_tree).
function M.temp_dir()
  local path = os.tmpname()
  os.remove(path)
  assert(uv.fs_mkdir(path, tonumber("700", 8)))
  return path
end

function M.write_file(path, data)
  local f = assert(io.open(path, "wb"))
  f:write(data)
  f:close()
end

function M.remove_tree(path)
  local req = uv.fs_scandir(path)
  if req then
    while true do
      local name, kind = uv.fs_scandir_next(req)
      if not name then break end
      local full = path .. "/" .. name
      if kind == "directory" then M.remove_tree(full) else os.remove(full) end
    end
  end
  uv.fs_rmdir(path)
end

M.json = cjson
return M
