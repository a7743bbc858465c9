-- The tool author's second week (issue #30, items 3 and 4): every error
-- points at the author's line, in the author's words, and luamcp dev never
-- gets stuck. Each message is asserted whole, with its file and line.

local client = require "mcp_client"
local cjson = client.json

-- A folder with one script, s.lua: `require "mcp"` on line 1, then lines.
local function folder_with(...)
  local dir = client.temp_dir()
  client.write_file(dir .. "/s.lua", 'local mcp = require "mcp"\n' .. table.concat({ ... }, "\n") .. "\n")
  return dir
end

-- luamcp run on a script that must fail to load: its exit code and stderr.
local function load(...)
  local dir = folder_with(...)
  local server = client.spawn { "run", dir }
  server:wait_exit(5000)
  server:close()
  client.remove_tree(dir)
  return server.exit_code, server.stderr, dir
end

describe("load errors name the file and line, in the author's words", function()
  for _, case in ipairs {
    { { 'mcp.resource { uri = "x://{id}", name = "r", read = function() return "x" end }' },
      's.lua:2: mcp.resource r: uri x://{id} has a {variable}: register it with mcp.template '
        .. '{ uriTemplate = "x://{id}", ... }, whose read gets the variables' },
    { { 'mcp.template { uriTemplate = "x://{?id}", name = "t", read = function() return "x" end }' },
      's.lua:2: mcp.template t: uriTemplate "x://{?id}": unsupported expression near "x://{?id}" '
        .. '(only {var} and {+var})' },
    { { 'mcp.resource { uri = "x://a", name = "r", handler = function() return "x" end }' },
      "s.lua:2: mcp.resource r: unknown field handler (did you mean read?)" },
    { { 'mcp.template { uriTemplate = "x://{id}", name = "t", handler = function() return "x" end }' },
      "s.lua:2: mcp.template t: unknown field handler (did you mean read?)" },
    { { 'mcp.prompt { name = "p", handler = function() return "x" end }' },
      "s.lua:2: mcp.prompt p: unknown field handler (did you mean get?)" },
    { { 'mcp.tool { name = "a", annotations = { readOnlyhint = true }, handler = function() end }' },
      "s.lua:2: mcp.tool a: annotations: unknown annotation readOnlyhint (did you mean readOnlyHint?)" },
    { { 'mcp.tool { name = "a", inputSchema = { type = "object",',
        '  properties = { { name = "path", type = "string" } } }, handler = function() end }' },
      "s.lua:2: tool a: inputSchema /properties is a Lua list; JSON Schema wants a map from each argument's name "
        .. 'to its schema: properties = { path = { type = "string" } }' },
    { { 'mcp.tool { name = "add_note", handler = function() end }',
        'mcp.tool { name = "add_note", handler = function() end }' },
      "s.lua:3: tool add_note is already registered at s.lua:2" },
    { { 'local listing = mcp.exec { argv = { "ls" } }' },
      "s.lua:2: mcp.exec can only be called while handling a request, from the handler's own coroutine "
        .. "(use mcp.spawn for concurrent work)" },
    { { 'local text = mcp.fs.read("notes.txt")' },
      "s.lua:2: mcp.fs.read can only be called while handling a request, from the handler's own coroutine "
        .. "(use mcp.spawn for concurrent work)" },
    { { 'local kept = mcp.state("handlers", { add = function() end })' },
      's.lua:2: mcp.state("handlers"): a function (at .add) cannot survive a reload: keep only tables, strings, '
        .. "numbers and booleans in it (functions belong in the script, which runs again at each reload)" },
  } do
    it("says " .. case[2], function()
      local code, stderr = load(table.unpack(case[1]))
      assert.are.equal(1, code)
      assert.truthy(stderr:find(case[2], 1, true), stderr)
    end)
  end

  it("keeps only the script's frames in the traceback of a load error", function()
    local code, stderr, dir = load('local function register() mcp.tool { name = "a", handler = 1 } end', "register()")
    assert.are.equal(1, code)
    local expected = dir .. "/s.lua:2: mcp.tool a: handler must be a function(args, ctx), got number\n"
      .. "stack traceback:\n\t" .. dir .. "/s.lua:2: in local 'register'\n\t" .. dir .. "/s.lua:3: in main chunk"
    assert.truthy(stderr:find(expected, 1, true), stderr)
    assert.falsy(stderr:find("[luamcp]", 1, true), stderr)
    assert.falsy(stderr:find("[C]", 1, true), stderr)
  end)
end)

describe("misuse of the library's functions, at the script's line", function()
  local dir, server
  setup(function()
    dir = folder_with(
      'mcp.tool { name = "exec_list", handler = function() local r = mcp.exec { "ls" } return r end }',
      'mcp.tool { name = "exec_typo", handler = function() local r = mcp.exec { argv = { "true" }, tiemout_ms = 5 } return r end }',
      'mcp.tool { name = "elicit", handler = function(_, ctx) local r = ctx:elicit { mesage = "Name?" } return r end }',
      'mcp.tool { name = "http", handler = function() local r = mcp.http.get("http://127.0.0.1:9", { timeout = 5 }) return r end }',
      'mcp.tool { name = "fs", handler = function() local r = mcp.fs.read() return r end }',
      'mcp.tool { name = "log", handler = function(_, ctx) ctx:log("warn", "x") return "" end }',
      'mcp.tool { name = "progress", handler = function(_, ctx) ctx:progress { progress = 1 } return "" end }',
      'mcp.tool { name = "raise_table", handler = function() error({ code = 42 }) end }',
      'mcp.tool { name = "content_string", handler = function() return { content = "text" } end }',
      'mcp.tool { name = "content_type", handler = function() return { content = { { type = "txt", text = "x" } } } end }',
      'mcp.tool { name = "add", timeout_ms = 200, handler = function(_, ctx) ctx:log("info", "adding") while true do end end }',
      'mcp.resource { uri = "x://raise", name = "raise", read = function() error({ code = 42 }) end }',
      'mcp.tool { name = "fs_rename", handler = function() local r = mcp.fs.rename("a") return r end }',
      'mcp.tool { name = "fs_remove", handler = function() local r = mcp.fs.remove("a", { recusive = true }) return r end }')
    server = client.spawn { "run", dir }
    server:initialize()
  end)
  teardown(function()
    server:close()
    client.remove_tree(dir)
  end)

  local function error_text(name)
    local result = server:call_tool(name, {})
    assert.is_true(result.isError, cjson.encode(result))
    return result.content[1].text
  end

  for _, case in ipairs {
    { "exec_list", 2, 'mcp.exec needs argv = { ... }: write mcp.exec{ argv = { "ls", ... } } (no shell is used)' },
    { "exec_typo", 3, "mcp.exec: unknown field tiemout_ms (did you mean timeout_ms?)" },
    { "elicit", 4, "ctx:elicit: unknown field mesage (did you mean message?)" },
    { "http", 5, "mcp.http: unknown option timeout (did you mean timeout_ms?)" },
    { "fs", 6, "mcp.fs.read needs a path (a string), got nil" },
    { "log", 7, 'ctx:log: "warn" is not a log level (did you mean warning?) '
      .. "(debug, info, notice, warning, error, critical, alert, emergency)" },
    { "fs_rename", 14, "mcp.fs.rename needs the new name (a string), got nil" },
    { "fs_remove", 15, "mcp.fs.remove: unknown option recusive (did you mean recursive?)" },
    { "progress", 8, 'ctx:progress takes (progress, total?, message?), not a table: ctx:progress(3, 10, "copying")' },
  } do
    it("raises " .. case[3], function()
      assert.are.equal(("%s/s.lua:%d: %s"):format(dir, case[2], case[3]), error_text(case[1]))
    end)
  end

  it("shows a table raised with error() as its JSON, not table: 0x...", function()
    local expected = 'the handler raised a table, {"code":42}: give error() a string, or use '
      .. "mcp.rpc_error(code, message) for a JSON-RPC error"
    assert.are.equal(expected, error_text("raise_table"))
    assert.truthy(server.stderr:find("tool raise_table failed: " .. expected, 1, true), server.stderr)
  end)

  it("shows a table raised by a resource's read as its JSON too", function()
    local r = server:request("resources/read", { uri = "x://raise" })
    assert.are.same({ code = -32603, message = 'Internal error: a table was raised, {"code":42} (give error() a '
      .. "string, or use mcp.rpc_error(code, message))" }, r.error)
  end)

  it("names content given as a string, and a content type MCP does not have, with the tool", function()
    local expected = "tool content_string (" .. dir .. "/s.lua:10) returned content as a string: content is a list "
      .. 'of blocks, e.g. { content = { mcp.text("...") } } (or return the text itself)'
    assert.are.equal(expected, error_text("content_string"))
    assert.truthy(server.stderr:find(expected, 1, true), server.stderr)
    assert.are.equal("tool content_type (" .. dir .. '/s.lua:11) returned content[1] of type "txt" (did you mean '
      .. "text?): the types are text, image, audio, resource_link and resource", error_text("content_type"))
  end)

  it("names the tool, not tools/call, in its log lines and at its time limit", function()
    assert.are.equal("stopped: the call exceeded its time limit of 200 ms", error_text("add"))
    assert.truthy(server.stderr:find("tool add: adding", 1, true), server.stderr)
    assert.truthy(server.stderr:find("tool add: stopped at its time limit (200 ms)", 1, true), server.stderr)
    assert.falsy(server.stderr:find("tools/call: ", 1, true), server.stderr)
  end)
end)

-- Write like an editor that saves through a temporary file.
local function save(path, text)
  client.write_file(path .. ".tmp", text)
  assert(os.rename(path .. ".tmp", path))
end

describe("luamcp dev never gets stuck", function()
  local dir, server
  after_each(function()
    if server then server:terminate(5000) end
    server = nil
    client.remove_tree(dir)
  end)

  it("waits for a fix when the first load fails, then serves", function()
    dir = folder_with('mcp.tool { name = "a", handler = 1 }')
    server = client.spawn { "dev", dir }
    assert(client.wait_until(function() return server.stderr:find("waiting for a change", 1, true) ~= nil end),
      server.stderr)
    assert.truthy(server.stderr:find(dir .. "/s.lua:2: mcp.tool a: handler must be a function(args, ctx), got number",
      1, true), server.stderr)
    assert.is_false(server.exited)
    save(dir .. "/s.lua", 'local mcp = require "mcp"\nmcp.tool { name = "a", handler = function() return "fixed" end }\n')
    server:initialize()
    assert.are.equal("fixed", server:call_tool("a", {}).content[1].text)
  end)

  it("still exits when the client closes stdin while it waits for a fix", function()
    dir = folder_with('mcp.tool { name = "a", handler = 1 }')
    server = client.spawn { "dev", dir }
    assert(client.wait_until(function() return server.stderr:find("waiting for a change", 1, true) ~= nil end),
      server.stderr)
    server:close_stdin()
    assert.are.equal(1, server:wait_exit())
    assert.truthy(server.stderr:find("luamcp dev: the client closed stdin while the scripts waited for a fix", 1, true),
      server.stderr)
  end)

  it("drops a function a handler stored in mcp.state at the next reload, keeps the rest, and reloads after", function()
    local function script(version)
      return 'local mcp = require "mcp"\nlocal memory = mcp.state("memory", { calls = 0 })\n'
        .. 'mcp.tool { name = "v", handler = function() memory.calls = memory.calls + 1 '
        .. 'memory.callback = function() end return "v' .. version .. ' calls=" .. memory.calls end }\n'
    end
    dir = client.temp_dir()
    save(dir .. "/s.lua", script(1))
    server = client.spawn { "dev", dir }
    server:initialize()
    assert.are.equal("v1 calls=1", server:call_tool("v", {}).content[1].text)
    for version = 2, 3 do
      save(dir .. "/s.lua", script(version))
      local text
      assert(client.wait_until(function()
        text = server:call_tool("v", {}).content[1].text
        return text:match("^v" .. version) ~= nil
      end, 5000), tostring(text) .. "\n" .. server.stderr)
    end
    assert.truthy(server.stderr:find("mcp.state: a function kept under key callback was dropped at this reload: only "
      .. "tables, strings, numbers and booleans survive", 1, true), server.stderr)
    assert.falsy(server.stderr:find("reload failed", 1, true), server.stderr)
  end)

  it("says that the kernel rules stay as first loaded when a reload widens the permissions", function()
    dir = client.temp_dir()
    local outside = client.temp_dir()
    client.write_file(outside .. "/f.txt", "secret")
    local function script(read)
      return 'local mcp = require "mcp"\nmcp.server { permissions = { read = { ' .. read .. ' } } }\n'
        .. 'mcp.tool { name = "r", handler = function() local d, e = mcp.fs.read(' .. ("%q"):format(outside .. "/f.txt")
        .. ') return d or e end }\n'
    end
    save(dir .. "/s.lua", script('"."'))
    server = client.spawn { "dev", dir }
    server:initialize()
    if not server.stderr:match("Landlock ABI %d+ also confines the process") then
      client.remove_tree(outside)
      pending("this kernel has no Landlock: " .. server.stderr)
      return
    end
    save(dir .. "/s.lua", script(('".", %q'):format(outside)))
    assert(client.wait_until(function()
      return server.stderr:find("the kernel rules (Landlock) stay as first loaded until a restart", 1, true) ~= nil
    end, 5000), server.stderr)
    local text = server:call_tool("r", {}).content[1].text
    client.remove_tree(outside)
    assert.are.equal(outside .. "/f.txt: Permission denied (denied by the kernel: its rules (Landlock) stay as first "
      .. "loaded until a restart; restart luamcp dev to apply the permissions a reload changed)", text)
  end)
end)
