-- luamcp dev: scripts reload in place; sessions, calls in flight and
-- mcp.state survive; clients hear list_changed only when a list changed.

local client = require "mcp_client"
local http = require "http_client"
local uv = require "luv"
local cjson = client.json

-- A server script whose tool answers with its version; `extra` is more Lua
-- appended to the file.
local function script(version, description, extra)
  return ([[
local mcp = require "mcp"
local memory = mcp.state("memory", { calls = 0 })
mcp.tool { name = "version", description = %q,
  handler = function() memory.calls = memory.calls + 1 return "v%d calls=" .. memory.calls end }
mcp.tool { name = "slow", description = "Sleeps, then says its version",
  handler = function(args) if args.tag then io.stderr:write("slow " .. args.tag .. " started\n") end mcp.sleep(args.ms or 2000) return "slow v%d" end }
mcp.tool { name = "info", description = "Generations", handler = function() return mcp.info() end }
%s
]]):format(description or "Says its version", version, version, extra or "")
end

-- Write like an editor that saves through a temporary file.
local function save(path, text)
  client.write_file(path .. ".tmp", text)
  assert(os.rename(path .. ".tmp", path))
end

local function version_of(result)
  return tonumber(result.content[1].text:match("^v(%d+)"))
end

describe("luamcp dev over stdio", function()
  local dir, server
  before_each(function()
    dir = client.temp_dir()
    save(dir .. "/tools.lua", script(1))
    server = client.spawn { "dev", dir }
    server:initialize()
  end)
  after_each(function()
    server:close()
    client.remove_tree(dir)
  end)

  -- Call `version` until it answers with want (the reload is debounced).
  local function wait_for_version(want)
    local got
    local ok = client.wait_until(function()
      got = version_of(server:call_tool("version", {}))
      return got == want
    end)
    assert(ok, ("still version %s, wanted %d\n%s"):format(tostring(got), want, server.stderr))
  end

  it("keeps the session initialized across 20 reloads, and mcp.state too", function()
    for v = 2, 21 do
      save(dir .. "/tools.lua", script(v))
      wait_for_version(v)
    end
    local r = server:call_tool("version", {})
    assert.are.equal(21, version_of(r))
    -- Every call since the start was counted in the state that survived.
    assert.truthy(tonumber(r.content[1].text:match("calls=(%d+)")) >= 21)
    local info = server:call_tool("info", {}).structuredContent
    assert.are.equal(21, info.generation)
    assert.are.equal(20, info.reloads)
  end)

  it("keeps mcp.state that a handler, not the top level, created", function()
    local counting = [[
mcp.tool { name = "count", handler = function()
  local c = mcp.state("counted_in_handler", { n = 0 })
  c.n = c.n + 1
  return c.n
end }
]]
    save(dir .. "/tools.lua", script(2, nil, counting))
    wait_for_version(2)
    assert.are.equal("1", server:call_tool("count", {}).content[1].text)
    assert.are.equal("2", server:call_tool("count", {}).content[1].text)
    save(dir .. "/tools.lua", script(3, nil, counting))
    wait_for_version(3)
    assert.are.equal("3", server:call_tool("count", {}).content[1].text)
    save(dir .. "/tools.lua", script(4, nil, counting))
    wait_for_version(4)
    assert.are.equal("4", server:call_tool("count", {}).content[1].text)
  end)

  it("finishes a call in flight on the old generation and serves new calls from the new one", function()
    server:send({ jsonrpc = "2.0", id = "before", method = "tools/call", params = { name = "slow", arguments = { ms = 2000, tag = "before" } } })
    assert.is_true(server:wait_stderr("slow before started"), server.stderr) -- in flight on generation 1
    save(dir .. "/tools.lua", script(2))
    wait_for_version(2)
    local r = server:request("tools/call", { name = "slow", arguments = { ms = 10 } })
    assert.are.equal("slow v2", r.result.content[1].text)
    local old = server:await_response("before")
    assert.are.equal("slow v1", old.result.content[1].text)
    -- Once that call is done the old generation is freed.
    assert.is_true(client.wait_until(function()
      return server:call_tool("info", {}).structuredContent.generations_open == 1
    end))
  end)

  it("keeps the old tools on a syntax error, tells the client, and resumes when fixed", function()
    save(dir .. "/tools.lua", script(2) .. "\nlocal broken = \n")
    local note
    assert.is_true(client.wait_until(function()
      local r = server:request("ping", {})
      for _, n in ipairs(server:notifications_named("notifications/message")) do
        if n.params.level == "error" then note = n end
      end
      return note ~= nil
    end))
    assert.are.equal("luamcp", note.params.logger)
    assert.truthy(note.params.data:find("tools.lua:11: unexpected symbol near <eof>", 1, true), note.params.data)
    assert.are.equal(1, version_of(server:call_tool("version", {})))
    save(dir .. "/tools.lua", script(3))
    wait_for_version(3)
  end)

  it("sends list_changed when, and only when, a list changed", function()
    local function count(method) return #server:notifications_named(method) end
    -- Only a handler's code changes: no list changed.
    save(dir .. "/tools.lua", script(2))
    wait_for_version(2)
    assert.are.equal(0, count("notifications/tools/list_changed"))
    -- A description changes: the tool list changed.
    save(dir .. "/tools.lua", script(3, "A new description"))
    wait_for_version(3)
    assert.are.equal(1, count("notifications/tools/list_changed"))
    -- A prompt appears: the prompt list changed, not the tools.
    save(dir .. "/tools.lua", script(4, "A new description",
      'mcp.prompt { name = "p", description = "d", get = function() return "hi" end }'))
    wait_for_version(4)
    assert.are.equal(1, count("notifications/tools/list_changed"))
    assert.are.equal(1, count("notifications/prompts/list_changed"))
    assert.are.equal(0, count("notifications/resources/list_changed"))
  end)

  it("reloads when a module the scripts require changes", function()
    client.write_file(dir .. "/helper.lua", "return { word = 'first' }")
    save(dir .. "/tools.lua", script(2, nil,
      'local helper = require "helper"\nmcp.tool { name = "word", description = "w", handler = function() return helper.word end }'))
    wait_for_version(2)
    assert.are.equal("first", server:call_tool("word", {}).content[1].text)
    save(dir .. "/helper.lua", "return { word = 'second' }")
    assert.is_true(client.wait_until(function()
      return server:call_tool("word", {}).content[1].text == "second"
    end))
  end)
end)

describe("the demo's notebook under luamcp run", function()
  it("keeps the notes written before a reload (SIGHUP), as the guide's dev loop promises", function()
    local server = client.spawn { "run", "scripts/demo" }
    server:initialize()
    server:call_tool("write_note", { name = "kept", text = "still here" })
    server:kill("sighup")
    assert.is_true(client.wait_until(function() return server.stderr:find("reloaded (", 1, true) ~= nil end, 30000),
      server.stderr)
    local read = server:request("resources/read", { uri = "notes://kept" })
    assert.are.equal("still here", read.result.contents[1].text)
    server:close()
  end)
end)

describe("luamcp run", function()
  it("reloads on SIGHUP (and only then)", function()
    local dir = client.temp_dir()
    save(dir .. "/tools.lua", script(1))
    local server = client.spawn { "run", dir }
    server:initialize()
    save(dir .. "/tools.lua", script(2))
    client.sleep(300)
    assert.are.equal(1, version_of(server:call_tool("version", {})))
    server:kill("sighup")
    assert.is_true(client.wait_until(function()
      return version_of(server:call_tool("version", {})) == 2
    end))
    server:close()
    client.remove_tree(dir)
  end)
end)

describe("luamcp dev over HTTP", function()
  it("keeps the session across 20 reloads", function()
    local dir = client.temp_dir()
    save(dir .. "/tools.lua", script(1))
    local server = http.start({ dir }, { command = "dev" })
    local session = server:initialize()
    local headers = { ["Mcp-Session-Id"] = session, ["MCP-Protocol-Version"] = "2025-11-25" }
    local function version()
      local r = server:post({ jsonrpc = "2.0", id = 1, method = "tools/call", params = { name = "version" } }, headers)
      assert.are.equal(200, r.status)
      return version_of(r.json.result)
    end
    for v = 2, 21 do
      save(dir .. "/tools.lua", script(v))
      assert.is_true(client.wait_until(function() return version() == v end, 30000), "no reload to v" .. v)
    end
    server:stop_cleanly()
    client.remove_tree(dir)
  end)
end)

-- A reload loads the new scripts in slices between loop turns: the current
-- generation answers meanwhile, even while a new top level loops.
describe("a reload that takes long to load", function()
  local dir, server, STOP, STARTED
  before_each(function()
    dir = client.temp_dir()
    -- Beside the folder, not in it: luamcp dev watches it.
    STOP = dir .. ".stop"
    STARTED = dir .. ".started"
  end)
  after_each(function()
    if server then server:terminate() end
    server = nil
    os.remove(STOP)
    os.remove(STARTED)
    client.remove_tree(dir)
  end)

  -- Version v, whose top level says it started, then loops until the spec
  -- creates the file STOP: until then its load is known to be in progress.
  local function loading_until_stopped(v)
    return script(v) .. ('print("loading v%d")\nwhile not io.open(%q) do end\n'):format(v, STOP)
  end

  local function start(command, load_timeout_ms)
    save(dir .. "/tools.lua", script(1))
    server = client.spawn { command, dir, "--load-timeout", tostring(load_timeout_ms) }
    server:initialize()
  end

  local function stderr_has(text)
    return client.wait_until(function() return server.stderr:find(text, 1, true) ~= nil end, 30000)
  end

  -- Answered, and which version answered.
  local function version_now()
    local r = server:request("tools/call", { name = "version", arguments = {} }, 30000)
    assert(r and r.result, "no answer to tools/call version\n" .. server.stderr)
    return version_of(r.result)
  end

  local function wait_for_version(want)
    local got
    assert(client.wait_until(function()
      got = version_now()
      return got == want
    end, 30000), ("still version %s, wanted %d\n%s"):format(tostring(got), want, server.stderr))
  end

  it("answers pings and tool calls from the current version while the new one loads", function()
    start("dev", 600000)
    save(dir .. "/tools.lua", loading_until_stopped(2))
    assert.is_true(stderr_has("loading v2"), server.stderr)
    -- The load cannot end before STOP exists (or in 10 minutes).
    for _ = 1, 3 do
      local pong = server:request("ping", {}, 30000)
      assert(pong and pong.result, "no pong while the new version loads\n" .. server.stderr)
      assert.are.equal(1, version_now())
    end
    assert.is_nil(server.stderr:find("reloaded (", 1, true))
    client.write_file(STOP, "")
    wait_for_version(2)
    assert.truthy(server.stderr:find("reloaded (a script changed)", 1, true), server.stderr)
  end)

  it("stops a looping load at --load-timeout, serving until then and the old tools after", function()
    start("dev", 8000)
    save(dir .. "/tools.lua", script(2) .. 'print("loading v2")\nwhile true do end\n')
    assert.is_true(stderr_has("loading v2"), server.stderr)
    local pong = server:request("ping", {}, 30000)
    assert(pong and pong.result, "no pong while the new version loads\n" .. server.stderr)
    assert.are.equal(1, version_now())
    -- Both answers came while the load was still running.
    assert.is_nil(server.stderr:find("reload failed", 1, true), server.stderr)
    assert.is_true(stderr_has("reload failed"), server.stderr)
    assert.truthy(server.stderr:find("exceeded their time limit of 8000 ms", 1, true), server.stderr)
    assert.truthy(server.stderr:find("tools.lua:", 1, true), server.stderr)
    -- The client was told too (the ping collects what arrived before it).
    assert.is_true(client.wait_until(function()
      server:request("ping", {}, 30000)
      for _, n in ipairs(server:notifications_named("notifications/message")) do
        if tostring(n.params.data):find("reload failed", 1, true) then return true end
      end
      return false
    end, 30000), "the client was not told\n" .. server.stderr)
    assert.are.equal(1, version_now())
    save(dir .. "/tools.lua", script(3))
    wait_for_version(3)
  end)

  it("abandons a load still in progress when a newer save arrives", function()
    start("dev", 600000)
    save(dir .. "/tools.lua", loading_until_stopped(2))
    assert.is_true(stderr_has("loading v2"), server.stderr)
    save(dir .. "/tools.lua", script(3))
    wait_for_version(3)
    assert.truthy(server.stderr:find("abandoned", 1, true), server.stderr)
    assert.is_nil(server.stderr:find("reload failed", 1, true), server.stderr)
    local info
    assert.is_true(client.wait_until(function()
      info = server:call_tool("info", {}).structuredContent
      return info.generations_open == 1
    end, 30000), server.stderr)
    assert.are.equal(2, info.generation)
    assert.are.equal(1, info.reloads)
  end)

  it("loads in slices on SIGHUP under luamcp run too", function()
    start("run", 600000)
    save(dir .. "/tools.lua", loading_until_stopped(2))
    server:kill("sighup")
    assert.is_true(stderr_has("loading v2"), server.stderr)
    local pong = server:request("ping", {}, 30000)
    assert(pong and pong.result, "no pong while the new version loads\n" .. server.stderr)
    assert.are.equal(1, version_now())
    client.write_file(STOP, "")
    wait_for_version(2)
    assert.truthy(server.stderr:find("reloaded (SIGHUP)", 1, true), server.stderr)
  end)

  it("logs a SIGHUP that arrives while a handler computes as a SIGHUP, not a file change", function()
    local started, stop = STARTED, STOP
    save(dir .. "/tools.lua", script(1, nil, ([[
mcp.tool { name = "compute", description = "Computes until told to stop", handler = function()
  io.open(%q, "w"):close()
  while not io.open(%q) do end
  return "computed"
end }
]]):format(started, stop)))
    server = client.spawn { "run", dir, "--timeout", "600000" }
    server:initialize()
    server:send({ jsonrpc = "2.0", id = "compute", method = "tools/call", params = { name = "compute", arguments = {} } })
    assert.is_true(client.wait_until(function() return io.open(started) ~= nil end, 30000), server.stderr)
    server:kill("sighup")
    assert.is_true(stderr_has("SIGHUP while a handler computes"), server.stderr)
    client.write_file(stop, "")
    local done = server:await_response("compute", 30000)
    assert(done and done.result, "no answer to compute\n" .. server.stderr)
    assert.is_true(stderr_has("reloaded ("), server.stderr)
    assert.truthy(server.stderr:find("reloaded (SIGHUP)", 1, true), server.stderr)
    assert.is_nil(server.stderr:find("a script changed", 1, true), server.stderr)
  end)
end)
