-- One probe, every target (issue #43 item 6): spec/fixtures/probe built the
-- way users build it (luamcp build, with --target for the other platforms;
-- docs/shipping.md), run natively, as the static build, as the arm64 build
-- under qemu and as the Windows build under wine, one server process per
-- target asked about every capability in turn. What it finds is held
-- against docs/platforms.md: a row that says yes must work, a row that says
-- no must fail with a message naming what is missing. A capability whose row
-- the table does not have yet is probed and reported, not judged: when its
-- row is added, the probe follows. spec/run-all.sh runs this once the cross
-- builds are there (with spec/cross_build_spec.lua).

local client = require "mcp_client"
local http = require "http_client"
local services = require "services"
local uv = require "luv"
local cjson = client.json

local sh = client.sh
local function quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end
local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end
local function which(name)
  local code, out = sh("command -v " .. name)
  return code == 0 and out:match("^(%S+)") or nil
end

local LUAMCP = io.popen("readlink -f " .. client.LUAMCP):read("l")
local BUILD_DIR = LUAMCP:match("^(.*)/[^/]+$")
local FIXTURE = io.popen("readlink -f spec/fixtures/probe"):read("l")
local NODE = exists("spec/node_modules/.bin/node") and "spec/node_modules/.bin/node" or which("node")
local WINE = which("wine")
local WINESERVER = which("wineserver")
local WINEPREFIX = os.getenv("LUAMCP_WINEPREFIX") or (BUILD_DIR .. "/windows/wineprefix")
-- wine's first start in a prefix, and qemu's, are slow on a loaded machine.
local SLOW_MS = 180000

-- A probe server that dies (a capability can bring it down) must not take
-- busted with it: a write to its stdin then fails instead of raising SIGPIPE.
local sigpipe = uv.new_signal()
uv.signal_start(sigpipe, "sigpipe", function() end)
uv.unref(sigpipe)

-- ---- docs/platforms.md ------------------------------------------------------

--- The platform table: rows by their first cell, each a list of the cells.
local function platform_table()
  local rows, header = {}, nil
  for line in io.lines("docs/platforms.md") do
    if line:find("^|") then
      local cells = {}
      for cell in line:gmatch("|%s*([^|]-)%s*%f[|]") do cells[#cells + 1] = cell end
      if not header then header = cells
      elseif not cells[1]:find("^%-%-%-") then rows[#rows + 1] = cells end
    elseif header and #rows > 0 then
      break
    end
  end
  local columns = {}
  for i, name in ipairs(header) do columns[name] = i end
  return rows, columns
end
local ROWS, COLUMNS = platform_table()

--- What the table says of a row (the first whose first cell starts with
--- key) for a column: true (works), false (lacks), or nil with why (no row).
local function expected(key, column, static)
  for _, cells in ipairs(ROWS) do
    if cells[1]:sub(1, #key) == key then
      local cell = assert(cells[COLUMNS[column]], "docs/platforms.md has no column " .. column)
      if static and cell:find("not in `--static`", 1, true) then return false, cell end
      if cell:find("^yes") then return true, cell end
      if cell:find("^no") then return false, cell end
      error("docs/platforms.md: the cell of " .. key .. " for " .. column .. " says neither yes nor no: " .. cell)
    end
  end
  return nil, "docs/platforms.md has no row for " .. key
end

-- ---- What the probe talks to --------------------------------------------------

--- A CA and a certificate for 127.0.0.1 it signs, minted now with openssl.
local function mint_certificates(dir)
  local function ssl(args)
    local code, out, err = sh("cd " .. quote(dir) .. " && openssl " .. args .. " 2>&1")
    assert(code == 0, "openssl " .. args .. ":\n" .. out .. err)
  end
  ssl("req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=probe-ca -keyout ca.key -out ca.pem"
    .. " -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign")
  ssl("req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout server.key -out server.csr")
  client.write_file(dir .. "/ext.cnf", "subjectAltName=IP:127.0.0.1,DNS:localhost\n")
  ssl("x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile ext.cnf -out server.pem")
  return dir .. "/ca.pem"
end

--- Node's HTTPS server answering "probe", on a port of its choosing.
local function https_origin(dir)
  local script = [[
const https = require("https"), fs = require("fs");
const dir = process.argv[1];
const server = https.createServer({ key: fs.readFileSync(dir + "/server.key"), cert: fs.readFileSync(dir + "/server.pem") },
  (req, res) => { res.writeHead(200, { "content-type": "text/plain" }); res.end("probe"); });
server.listen(0, "::", () => console.log("listening " + server.address().port));
process.stdin.on("end", () => process.exit(0)); process.stdin.resume();
]]
  local proc = client.spawn({ "-e", script, dir }, { bin = NODE })
  local port
  assert(client.wait_until(function()
    port = table.concat(proc.lines, "\n"):match("listening (%d+)") or proc.buffer:match("listening (%d+)")
    return port or proc.exited
  end, 60000) and port, "the HTTPS origin did not start: " .. proc.stderr)
  -- localhost, not 127.0.0.1: Schannel (Windows) matches a host name, never an IP address, against the names
  -- a certificate carries.
  return proc, "https://localhost:" .. port .. "/"
end

-- ---- The capabilities -----------------------------------------------------------

-- One entry each: the row of docs/platforms.md that speaks for it, what its
-- failure must name, and either probe (the fixture's PROBES entry, with args
-- from the target and the shared services), launch (options the program
-- is started with, served over HTTP) or command (arguments of the target's
-- luamcp itself, the runtime the program was built from, with environment).
local CAPABILITIES = {
  { row = "`mcp.http`", names = "mcp.http", probe = "http",
    args = function(t, s) return { url = s.https_url, ca_file = t.native(s.ca) } end },
  { row = "`mcp.exec`", names = "mcp.exec", probe = "exec", args = function(t) return { argv = t.echo_argv } end },
  { row = "`mcp.fs`", names = "mcp.fs", probe = "fs", args = function(t, s) return { dir = t.native(s.dir("fs")) } end },
  { row = "`mcp.fs.mkdir`", names = "mcp.fs.mkdir", probe = "fs_mkdir",
    args = function(t, s) return { dir = t.native(s.dir("mkdir")) } end },
  { row = "`mcp.paths`", names = "mcp.paths", probe = "paths" },
  { row = "`mcp.sqlite`", names = "mcp.sqlite", probe = "sqlite" },
  { row = "`mcp.client` to a child", names = "mcp.client", probe = "client_child",
    args = function(t) return { command = t.self_command } end },
  { row = "`mcp.client` to a URL", names = "mcp.client", probe = "client_url",
    args = function(_, s) return { url = s.mcp_url } end },
  { row = "`luamcp call` with OAuth", names = "luamcp call",
    command = function(_, s)
      if not s.oauth_url then return nil, s.no_oauth end
      return { "call", "--http", s.oauth_url, "--client-id", "m2m", "--client-secret-env", "PROBE_SECRET", "whoami" },
        { "PROBE_SECRET=m2m-secret" }
    end },
  { row = "MCP tasks", names = "tasks", task = "probe_task" },
  { row = "`--workers`", names = "--workers", launch = function() return { "--workers", "2" } end },
  { row = "`--redis`", names = "--redis",
    launch = function(_, s)
      if not s.redis then return nil, s.no_redis end
      return { "--redis", s.redis.url }
    end },
}

-- ---- The targets ------------------------------------------------------------------

local function posix_path(path) return path end
local function windows_path(path) return "Z:" .. path:gsub("/", "\\") end
local WINE_ENV = { "WINEPREFIX=" .. WINEPREFIX, "WINEDEBUG=-all", "HOME=" .. (os.getenv("HOME") or "/root"),
                   "PATH=" .. (os.getenv("PATH") or "/usr/bin:/bin") }

local function arm64_runs()
  local f = io.open("/proc/sys/fs/binfmt_misc/qemu-aarch64", "r")
  local status = f and f:read("l")
  if f then f:close() end
  return status == "enabled"
end

-- Each: the table's column, whether its runtime is the static one, the
-- build's options, what must be there (with why when it is not), how the
-- program is started (launcher words before it) and the platform's forms.
local TARGETS = {
  { name = "linux-x64, this machine's build", column = "Linux x86-64", build = {}, runtime = LUAMCP,
    native = posix_path, echo_argv = { "/bin/echo", "hello" } },
  { name = "linux-x64", column = "Linux x86-64", static = true, build = { "--target", "linux-x64" },
    needs = BUILD_DIR .. "/luamcp-static", make = "make build/luamcp-static", runtime = BUILD_DIR .. "/luamcp-static",
    native = posix_path, echo_argv = { "/bin/echo", "hello" } },
  { name = "linux-arm64 (qemu)", column = "Linux arm64", static = true, build = { "--target", "linux-arm64" },
    needs = BUILD_DIR .. "/linux-arm64/luamcp", make = "make linux-arm64", runtime = BUILD_DIR .. "/linux-arm64/luamcp",
    missing = not arm64_runs() and "no binfmt_misc handler for aarch64 (runtime/tools/cross/qemu-binfmt.sh)" or nil,
    native = posix_path, echo_argv = { "/bin/echo", "hello" } },
  { name = "windows-x64 (wine)", column = "Windows x64", build = { "--target", "windows-x64" },
    needs = BUILD_DIR .. "/windows/luamcp.exe", make = "make windows", runtime = BUILD_DIR .. "/windows/luamcp.exe",
    missing = not (WINE and WINESERVER) and "no wine (Debian packages wine, wine64)" or nil,
    launcher = { WINE }, env = WINE_ENV, suffix = ".exe",
    native = windows_path, echo_argv = { "cmd", "/c", "echo", "hello" } },
}

local function why_not(t)
  if t.needs and not exists(t.needs) then return "no " .. t.needs .. " (" .. t.make .. ")" end
  return t.missing
end

--- The program and its arguments as a process is started: argv[1] the bin.
local function command_of(t, program, args)
  local argv = {}
  for _, w in ipairs(t.launcher or {}) do argv[#argv + 1] = w end
  argv[#argv + 1] = program
  for _, a in ipairs(args or {}) do argv[#argv + 1] = a end
  return table.remove(argv, 1), argv
end

-- ---- The shared services, started once --------------------------------------------

local services_up
local function shared()
  if services_up then return services_up end
  local s = { root = client.temp_dir(), procs = {} }
  local n = 0
  function s.dir(name)
    n = n + 1
    local d = s.root .. "/" .. name .. n
    assert(os.execute("mkdir -p " .. quote(d)))
    return d
  end
  s.ca = mint_certificates(s.root)
  local origin
  origin, s.https_url = https_origin(s.root)
  s.procs[#s.procs + 1] = origin
  -- The fixture itself, served natively over HTTP: what client_url calls.
  s.mcp_server = http.start({ FIXTURE })
  s.mcp_url = s.mcp_server.url
  s.redis, s.no_redis = services.redis()
  -- An authorization server (spec/helpers/oidc_provider.mjs, client "m2m"
  -- by client credentials) and spec/fixtures/auth_e2e protected by it (its
  -- whoami names the client).
  if NODE then
    local keys = s.dir("keys")
    local code, _, err = sh(quote(NODE) .. " spec/helpers/jwt_mint.mjs keys " .. quote(keys))
    assert(code == 0, err)
    local provider = client.spawn({ "spec/helpers/oidc_provider.mjs",
      cjson.encode { keys = keys, any_resource = { scope = "probe" } } }, { bin = NODE })
    local line = provider:read_line(60000)
    assert(line, "oidc-provider did not start:\n" .. provider.stderr)
    s.procs[#s.procs + 1] = provider
    s.oauth_server = http.start { "--auth-issuer", cjson.decode(line).issuer, "spec/fixtures/auth_e2e" }
    s.oauth_url = s.oauth_server.url
  else
    s.no_oauth = "no Node (npm ci in spec/)"
  end
  services_up = s
  return s
end

local function stop_shared()
  local s = services_up
  if not s then return end
  s.mcp_server:stop()
  if s.oauth_server then s.oauth_server:stop() end
  if s.redis then s.redis:stop() end
  for _, p in ipairs(s.procs) do p:close() end
  client.remove_tree(s.root)
  services_up = nil
end

-- ---- Running a launch capability --------------------------------------------------

--- Start the program with --http and the options; works when it serves and
--- answers initialize, lacks (with its stderr) when it exits.
local function launch(t, program, options, cwd)
  local args = { "--http", "127.0.0.1:0", "--drain-time", "0" }
  for _, o in ipairs(options) do args[#args + 1] = o end
  local bin, argv = command_of(t, program, args)
  local proc = client.spawn(argv, { bin = bin, cwd = cwd, env = t.env })
  local port
  client.wait_until(function()
    port = tonumber(proc.stderr:match("serving MCP over HTTP at http://[^:]+:(%d+)/"))
    return port or proc.exited
  end, SLOW_MS)
  if not port then
    local stderr = proc.stderr
    proc:close()
    return false, stderr
  end
  local conn = http.connect(port)
  local r = conn and conn:request { method = "POST", headers = { Accept = http.ACCEPT_BOTH,
    ["Content-Type"] = "application/json" }, body = { jsonrpc = "2.0", id = 1, method = "initialize",
    params = { protocolVersion = "2025-11-25", capabilities = cjson.decode("{}"),
               clientInfo = { name = "probe", version = "1" } } } }
  if conn then conn:close() end
  proc:terminate(60000)
  if r and r.status == 200 and r.json and r.json.result then return true, "served initialize" end
  return false, "no answer to initialize: " .. cjson.encode(r or {}) .. "\n" .. proc.stderr
end

-- ---- Known defects ----------------------------------------------------------------

-- A capability the table rightly promises that fails on a target for a bug
-- not yet fixed (found by this probe): "TARGET capability" = the bug. Its
-- test is pending with the bug and what the probe found this time (the
-- defects below are not every time); fixing one removes its line.
local KNOWN = {
}

-- ---- The specs ------------------------------------------------------------------

--- Whether the server still answers: an echo, asked again until it
--- answers, or the process exits or says an assertion failed (an aborted
--- program under wine may stay, waiting on its debugger).
local function alive(server)
  local answered = false
  client.wait_until(function()
    if server.exited then return true end
    local echo = server:request("tools/call", { name = "echo", arguments = { text = "alive" } }, 5000)
    answered = echo ~= nil and echo.result ~= nil
    return answered or server.exited or server.stderr:find("Assertion failed", 1, true) ~= nil
  end, SLOW_MS)
  return answered
end

--- The probe server of target t, started from program in dir, initialized.
--- A tool called as a task by a 2026-07-28 client that declares the tasks
--- extension, followed with tasks/get until it ends: works when it
--- completed with the tool's answer.
local TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
local function run_task(server, tool)
  local function meta(params)
    params._meta = { ["io.modelcontextprotocol/protocolVersion"] = "2026-07-28",
      ["io.modelcontextprotocol/clientCapabilities"] = { extensions = { [TASKS_EXTENSION] = cjson.decode("{}") } },
      ["io.modelcontextprotocol/clientInfo"] = { name = "probe", version = "1" } }
    return params
  end
  local r = server:request("tools/call", meta({ name = tool, arguments = cjson.decode("{}") }), SLOW_MS)
  local created = r and r.result
  if not (created and created.resultType == "task" and created.taskId) then
    return false, "tasks: no task for the call: " .. cjson.encode(r or {})
  end
  local state
  client.poll_until(function()
    local g = server:request("tasks/get", meta({ taskId = created.taskId }), SLOW_MS)
    state = g and g.result
    return not state or (state.status ~= "working" and state.status ~= "input_required")
  end, SLOW_MS)
  local text = state and state.result and state.result.content and state.result.content[1].text
  if state and state.status == "completed" and text == "task done" then
    return true, "task " .. created.taskId .. " completed"
  end
  return false, "tasks: the task ended " .. cjson.encode(state or {})
end

local function start_probe(t, program, dir)
  local bin, argv = command_of(t, program)
  local server = client.spawn(argv, { bin = bin, cwd = dir, env = t.env })
  local response = server:request("initialize", { protocolVersion = "2025-11-25", capabilities = {},
    clientInfo = { name = "probe", version = "1" } }, SLOW_MS)
  assert(response and response.result, "the probe did not start: " .. server.stderr)
  server:notify("notifications/initialized")
  return server
end

-- Started once for the whole file (the reaper stops a process when what
-- started it ends).
setup(function() shared() end)
teardown(stop_shared)

for _, t in ipairs(TARGETS) do
  describe("the probe built for " .. t.name, function()
    local skip = why_not(t)
    local dir, program, server
    local fresh_each_test = false
    setup(function()
      if skip then return end
      dir = client.temp_dir()
      program = dir .. "/probe" .. (t.suffix or "")
      local words = { quote(LUAMCP), "build", quote(FIXTURE), "-o", quote(dir .. "/probe") }
      for _, w in ipairs(t.build) do words[#words + 1] = quote(w) end
      local code, out, err = sh(table.concat(words, " ") .. " </dev/null")
      assert(code == 0, "luamcp build failed:\n" .. out .. err)
      t.build_stderr = err
      -- The child mcp.client starts: this program, as its own platform names it.
      t.self_command = { t.native(program) }
      server = start_probe(t, program, dir)
    end)
    teardown(function()
      if server then server:close() end
      if t.env and WINESERVER then sh("env " .. quote(t.env[1]) .. " timeout 60 " .. quote(WINESERVER) .. " -w") end
      if dir then client.remove_tree(dir) end
    end)

    -- A known defect's capability goes last: what it does to the server
    -- (or to wine) leaves the others' verdicts alone.
    local order = {}
    for _, cap in ipairs(CAPABILITIES) do if not KNOWN[t.name .. " " .. cap.names] then order[#order + 1] = cap end end
    for _, cap in ipairs(CAPABILITIES) do if KNOWN[t.name .. " " .. cap.names] then order[#order + 1] = cap end end
    for _, cap in ipairs(order) do
      local want, cell = expected(cap.row, t.column, t.static)
      local says = want == nil and "(not in the table: reported only)"
        or ("as docs/platforms.md says: " .. (want and "works" or "fails, naming " .. cap.names))
      it(cap.row:gsub("`", "") .. " " .. says, function()
        if skip then
          pending(skip)
          return
        end
        local s = shared()
        local works, detail
        -- After a capability brought it down, each test starts its own (the
        -- reaper ends a process with the test that started it).
        if fresh_each_test then server = start_probe(t, program, dir) end
        if cap.probe then
          local args = cap.args and cap.args(t, s) or {}
          local response = server:request("tools/call", { name = "probe",
            arguments = { capability = cap.probe, args = args } }, SLOW_MS)
          local r = response and response.result
          if r then
            assert(r.structuredContent, "not the probe's answer: " .. cjson.encode(response))
            works, detail = r.structuredContent.works, r.structuredContent.detail or r.structuredContent.error
          else
            works, detail = false, "no answer: " .. cjson.encode(response or {}) .. "\n" .. server.stderr
          end
          -- A capability that brings the server down does not work: the
          -- next call finds out, and the next capability gets a new server.
          if not alive(server) then
            works, detail = false, cap.names .. ": the server died after the call:\n" .. server.stderr
            server:close()
            fresh_each_test = true
          end
        elseif cap.task then
          works, detail = run_task(server, cap.task)
        elseif cap.command then
          local args, env = cap.command(t, s)
          if not args then
            pending(env)
            return
          end
          local bin, argv = command_of(t, t.runtime, args)
          local full_env = { "PATH=" .. (os.getenv("PATH") or "/usr/bin:/bin") }
          for _, e in ipairs(t.env or {}) do full_env[#full_env + 1] = e end
          for _, e in ipairs(env) do full_env[#full_env + 1] = e end
          local proc = client.spawn(argv, { bin = bin, cwd = dir, env = full_env })
          proc:close_stdin()
          local code = proc:wait_exit(SLOW_MS)
          local out = table.concat(proc.lines, "\n") .. proc.buffer
          works = code == 0 and out:find("m2m", 1, true) ~= nil
          detail = works and "called whoami as m2m" or ("exit " .. tostring(code) .. ": " .. out .. proc.stderr)
          proc:close()
        else
          local options, why = cap.launch(t, s)
          if not options then
            pending(why)
            return
          end
          works, detail = launch(t, program, options, dir)
        end
        print(("probe %s: %s %s: %s"):format(t.name, cap.names, works and "works" or "lacks", detail))
        local known = KNOWN[t.name .. " " .. cap.names]
        if known then
          pending(("known defect: %s (this time it %s)"):format(known, works and "worked" or "failed"))
          return
        end
        if want == true then
          assert(works, cap.names .. " fails on " .. t.name .. ", but docs/platforms.md says " .. cell .. ":\n" .. detail)
        elseif want == false then
          assert(not works, cap.names .. " works on " .. t.name .. ", but docs/platforms.md says " .. cell)
          assert(detail:find(cap.names, 1, true), "the failure does not name " .. cap.names .. ": " .. detail)
          -- The fixture names what it uses as mcp.X: build said so first.
          if cap.names:find("^mcp%.") then
            local warning = t.build_stderr:match("warning: the scripts use " .. cap.names:gsub("%.", "%%.") .. ",[^\n]*")
            assert(warning and warning:find(t.build[2] or "", 1, true),
              "luamcp build did not warn that the " .. t.name .. " runtime lacks " .. cap.names .. ":\n" .. t.build_stderr)
          end
        end
      end)
    end
  end)
end
