-- luamcp's Lua A2A client (mcp.a2a, lua/mcp/a2a_client.lua) against an
-- agent written with the official SDK (@a2a-js/sdk 1.3.0,
-- spec/clients/a2a_sdk_server.mjs), in both protocol versions: a script's
-- tools (spec/fixtures/a2a/client.lua) drive it and say what they saw.
-- Then agents run as child processes of the script (the SDK one and a
-- luamcp one), judged by the exec permission and stopped when closed.

local http = require "http_client"
local client = require "mcp_client"
local NODE = require("node_runner").NODE
local cjson = client.json

local FIXTURE = "spec/fixtures/a2a/client.lua"

local function call(server, name, arguments)
  local session = server:initialize()
  local r = server:post({ jsonrpc = "2.0", id = 2, method = "tools/call", params = { name = name, arguments = arguments } },
    { ["Mcp-Session-Id"] = session, ["MCP-Protocol-Version"] = "2025-11-25" }, { timeout_ms = 240000 })
  local result = assert(http.rpc(r).result, r.body)
  assert.is_not_true(result.isError, result.content[1].text)
  return result.content[1].text
end

-- Is a process running whose command line holds needle?
local function running(needle)
  local ps = io.popen("ps -eo args=")
  local all = ps:read("a")
  ps:close()
  return all:find(needle, 1, true) ~= nil
end

local function spawn_node(args)
  local p = client.spawn(args, { bin = NODE })
  local line = p:read_line(60000)
  assert(line, "node did not start:\n" .. p.stderr)
  return p, math.tointeger(cjson.decode(line).port)
end

describe("the Lua A2A client against an @a2a-js/sdk agent", function()
  local server, sdk, sdk_port, receiver, receiver_port
  setup(function()
    server = http.start { FIXTURE }
    sdk, sdk_port = spawn_node { "spec/clients/a2a_sdk_server.mjs" }
  end)
  teardown(function()
    if server then server:stop_cleanly() end
    if sdk then sdk:terminate(5000) end
    if receiver then receiver:terminate(5000) end
  end)

  for _, version in ipairs { "1.0", "0.3" } do
    it("sends, streams, asks and resumes, cancels, resubscribes, lists and pushes in " .. version, function()
      receiver, receiver_port = spawn_node { "spec/clients/a2a_push_receiver.mjs" }
      local out = cjson.decode(call(server, "drive", { url = "http://127.0.0.1:" .. sdk_port, version = version,
        push_url = ("http://127.0.0.1:%d/hook"):format(receiver_port) }))
      assert.are.equal(version, out.version)
      assert.are.equal("SDK agent", out.name)
      assert.are.equal("echo: from lua", out.echo)
      assert.are.same({ "task:TASK_STATE_SUBMITTED", "status:TASK_STATE_WORKING", "artifact:1", "artifact:2",
                        "artifact:3:last", "status:TASK_STATE_COMPLETED" }, out.stream)
      assert.are.equal("status:TASK_STATE_COMPLETED", out.stream_last)
      assert.are.same({ state = "TASK_STATE_INPUT_REQUIRED", question = "what is your name?" }, out.asked)
      assert.are.same({ state = "TASK_STATE_COMPLETED", reply = "hello, Ada" }, out.answered)
      assert.are.equal("TASK_STATE_CANCELED", out.got)
      -- the cut stream is an error naming its task; subscribe follows it to the end
      assert.are.same({ ok = false, dropped = true, same_task = true }, out.dropped)
      assert.are.equal("task:TASK_STATE_WORKING", out.resubscribed[1])
      assert.are.equal("artifact:2:last", out.resubscribed[#out.resubscribed - 1])
      assert.are.equal("status:TASK_STATE_COMPLETED", out.resubscribed[#out.resubscribed])
      if version == "1.0" then
        assert.is_true(out.listed >= 4) -- count, ask, wait and hold (echo made no task)
        assert.is_true(out.listed_completed)
        assert.is_true(out.listed_canceled)
      else
        assert.truthy(out.list_error:find("1.0", 1, true), out.list_error)
      end
      assert.are.same({ url = ("http://127.0.0.1:%d/hook"):format(receiver_port), token = "tok-1", task = true,
                        scheme = "Bearer" }, out.push_set)
      assert.are.equal(out.push_set.url, out.push_got)
      assert.are.equal(1, out.push_listed)
      assert.are.equal("TASK_STATE_COMPLETED", out.push_answered)
      assert.are.equal("-32001", out.unknown) -- TaskNotFound
      -- the receiver hears the task complete, with the config's authentication
      local completed
      repeat
        local line = receiver:read_line(60000)
        assert(line, "no completion pushed:\n" .. receiver.stderr)
        local n = cjson.decode(line)
        assert.are.equal("Bearer cred-1", n.auth) -- the SDK sends the token only without authentication
        local body = cjson.encode(n.body)
        completed = body:find(out.push_task, 1, true) and (body:find("TASK_STATE_COMPLETED", 1, true)
          or body:find('"completed"', 1, true))
      until completed
      assert.are.same({ before = 1, after = 0 }, cjson.decode(call(server, "unpush",
        { url = "http://127.0.0.1:" .. sdk_port, version = version, task = out.push_task })))
      receiver:terminate(5000)
      receiver = nil
    end)
  end
end)

describe("the Lua A2A client given bad input", function()
  it("raises clear errors", function()
    local server = http.start { FIXTURE }
    local out = cjson.decode(call(server, "misuse", { url = "http://127.0.0.1:" .. server.port }))
    server:stop_cleanly()
    assert.truthy(out.version:find('version is "1.0" or "0.3"', 1, true), out.version)
    assert.truthy(out.command:find("command is a program", 1, true), out.command)
    assert.truthy(out.target:find("an http(s) URL, or {command", 1, true), out.target)
    assert.truthy(out.forced:find("reading the card", 1, true), out.forced)
  end)
end)

describe("an agent run as a child process of the script", function()
  local server
  setup(function() server = http.start { FIXTURE } end)
  teardown(function() if server then server:stop_cleanly() end end)

  local function absolute(path) return path:sub(1, 1) == "/" and path or assert(os.getenv("PWD")) .. "/" .. path end

  it("runs the SDK agent on a port chosen at run time, and stops it when closed", function()
    for _, version in ipairs { "1.0", "0.3" } do
      local out = cjson.decode(call(server, "child", { version = version,
        argv = { absolute(NODE), absolute("spec/clients/a2a_sdk_server.mjs"), "--port", "{port}" } }))
      assert.is_nil(out.error)
      assert.are.equal(version, out.version)
      assert.are.equal("SDK agent", out.name)
      assert.are.equal("echo: from a child", out.echo)
      assert.are.equal(1, out.running)
      assert.are.equal(0, out.after_close)
      assert.truthy(out.send_after_close:find("closed", 1, true), out.send_after_close)
    end
  end)

  it("runs a luamcp agent (luamcp run --http 127.0.0.1:{port}), and stops it when closed", function()
    local out = cjson.decode(call(server, "child", {
      argv = { absolute(client.LUAMCP), "run", "--http", "127.0.0.1:{port}", absolute("spec/fixtures/a2a/agent.lua") } }))
    assert.is_nil(out.error)
    assert.are.equal("1.0", out.version)
    assert.are.equal("Echo agent", out.name)
    assert.are.equal("echo: from a child", out.echo)
    assert.are.equal(1, out.running)
    assert.are.equal(0, out.after_close)
  end)

  it("reports a child that exits before it answers, with its exit and the end of its stderr", function()
    local out = cjson.decode(call(server, "child", { argv = { "/bin/sh", "-c", "echo no agent here >&2; exit 3" } }))
    assert.truthy(out.error:find("no agent here", 1, true), out.error)
    assert.truthy(out.error:find("3", 1, true), out.error)
  end)

  it("gives up on a child that never serves a card, quoting its stderr, and stops it", function()
    local out = cjson.decode(call(server, "child", { timeout_ms = 2000,
      argv = { "/bin/sh", "-c", "echo still starting >&2; exec sleep 297" } }))
    assert.truthy(out.error:find("no agent card", 1, true), out.error)
    assert.truthy(out.error:find("still starting", 1, true), out.error)
    assert.truthy(client.poll_until(function() return not running("sleep 297") end, 30000), "the child still runs")
  end)

  it("stops a child left open when the server ends", function()
    local own = http.start { FIXTURE }
    local out = cjson.decode(call(own, "child", { keep = true,
      argv = { absolute(NODE), absolute("spec/clients/a2a_sdk_server.mjs"), "--port", "{port}" } }))
    assert.is_true(running("--port " .. out.port))
    own:stop_cleanly()
    assert.truthy(client.poll_until(function() return not running("--port " .. out.port) end, 30000),
      "the child outlived its server")
  end)

  it("is refused without the exec permission", function()
    local confined = http.start { "spec/fixtures/a2a/client_confined.lua" }
    local text = call(confined, "spawn", { argv = { absolute(NODE), absolute("spec/clients/a2a_sdk_server.mjs") } })
    confined:stop_cleanly()
    assert.truthy(text:find("permission denied: exec", 1, true), text)
  end)
end)
