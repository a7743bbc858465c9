-- scripts/toolbox, the example of the runtime's building blocks: mcp.exec
-- (git), mcp.fs with mcp.all, mcp.state across a reload, and ctx:sample
-- answered by this spec as the client.

local client = require "mcp_client"

describe("scripts/toolbox", function()
  local dir, server
  setup(function()
    dir = client.temp_dir()
    client.write_file(dir .. "/a.txt", "one\ntwo\nthree\n")
    client.write_file(dir .. "/b.txt", "only\n")
    assert(os.execute("mkdir " .. dir .. "/sub && cd " .. dir .. " && git init -q && git add a.txt && "
      .. "git -c user.name=t -c user.email=t@example.com commit -q -m 'first commit' >/dev/null 2>&1"))
    server = client.spawn({ "run", "scripts/toolbox" }, { env = { "PATH=" .. os.getenv("PATH"), "TOOLBOX_ROOT=" .. dir } })
    server:initialize("2025-11-25", { sampling = {} })
  end)
  teardown(function()
    server:close()
    client.remove_tree(dir)
  end)

  it("runs git without a shell (mcp.exec)", function()
    local result = server:call_tool("git_log", { count = 1 })
    assert.truthy(result.content[1].text:find("first commit", 1, true), result.content[1].text)
  end)

  it("lists a folder and counts lines of several files at once (mcp.fs, mcp.all)", function()
    assert.are.equal("a.txt\nb.txt\nsub/", (server:call_tool("list_files", {}).content[1].text:gsub("%.git/\n", "")))
    local counts = server:call_tool("line_count", { paths = { "a.txt", "b.txt", "missing.txt" } }).structuredContent
    assert.are.equal(3, counts["a.txt"])
    assert.are.equal(1, counts["b.txt"])
    assert.truthy(tostring(counts["missing.txt"]):find("missing.txt", 1, true))
    local refused = server:call_tool("list_files", { path = "../" })
    assert.is_true(refused.isError)
  end)

  it("keeps its visits across a reload (mcp.state)", function()
    assert.are.equal("1", server:call_tool("visit", {}).content[1].text)
    assert.are.equal("2", server:call_tool("visit", {}).content[1].text)
    server:kill("sighup")
    assert.is_true(client.wait_until(function() return server.stderr:find("reloaded (", 1, true) ~= nil end, 30000))
    assert.are.equal("3", server:call_tool("visit", {}).content[1].text)
  end)

  it("asks the client's model (ctx:sample)", function()
    server:send { jsonrpc = "2.0", id = 77, method = "tools/call", params = { name = "summarize",
      arguments = { text = "Lua is a small language." } } }
    local ask = server:read(5000)
    assert.are.equal("sampling/createMessage", ask.method)
    assert.truthy(ask.params.messages[1].content.text:find("Lua is a small language.", 1, true))
    server:send { jsonrpc = "2.0", id = ask.id, result = { role = "assistant", model = "m",
      content = { type = "text", text = "Lua: small." } } }
    local answer = server:await_response(77)
    assert.are.equal("Lua: small.", answer.result.content[1].text)
  end)
end)
