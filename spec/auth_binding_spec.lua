-- The caller's identity inside a server (issue #29). The identities come
-- from mcp.testing (spec/inprocess/auth_binding_test.lua, run here through
-- `luamcp test`): they reach the core as a verified token's would, so
-- ctx.auth in both eras, scopes refused before the handler, MCP tasks,
-- requestState and subscriptions bound to their caller are checked there.
-- Here: that suite passes, what a server with nobody authenticated (stdio)
-- does with scopes, and the script mistakes `scopes` is checked for.
-- Real tokens over HTTP, --workers 2 and Redis: spec/auth_*_spec.lua (h-e2e).

local client = require "mcp_client"

local FIXTURE = "spec/fixtures/auth_binding"

describe("the caller's identity, with mcp.testing identities", function()
  it("passes spec/inprocess/auth_binding_test.lua under luamcp test", function()
    local code, out, err = client.sh(client.LUAMCP .. " test -o TAP --pattern=_test spec/inprocess/auth_binding_test.lua"
      .. " </dev/null")
    assert.are.equal(0, code, out .. err)
    local passed = 0
    for line in out:gmatch("[^\n]+") do
      if line:match("^ok ") then passed = passed + 1 end
      assert.is_nil(line:match("^not ok .*"), line)
    end
    assert.are.equal(14, passed, out)
  end)
end)

describe("scopes with nobody authenticated (stdio)", function()
  local server
  before_each(function()
    server = client.spawn { "run", FIXTURE }
    server:initialize()
  end)
  after_each(function() server:close() end)

  it("lists every primitive, and enforces nothing (authorization is the transport's)", function()
    local tools = server:request("tools/list", {}).result.tools
    local names = {}
    for _, t in ipairs(tools) do names[t.name] = t end
    assert.truthy(names.write_note)
    -- The scopes are the server's business: not part of the tool's wire form.
    assert.is_nil(names.write_note.scopes)
    assert.are.equal("written", server:call_tool("write_note", {}).content[1].text)
    local r = server:request("resources/read", { uri = "notes://secret" })
    assert.are.equal("the secret", r.result.contents[1].text)
    r = server:request("resources/subscribe", { uri = "notes://secret" })
    assert.are.same({}, r.result)
    assert.is_true(server:call_tool("whoami", {}).structuredContent.anonymous)
  end)
end)

describe("scopes in a script", function()
  local function load(line)
    local dir = client.temp_dir()
    client.write_file(dir .. "/s.lua", 'local mcp = require "mcp"\n' .. line .. "\n")
    local server = client.spawn { "run", dir }
    server:wait_exit(5000)
    server:close()
    client.remove_tree(dir)
    return server.exit_code, server.stderr
  end

  for _, case in ipairs {
    { 'mcp.tool { name = "a", scopes = "notes:write", handler = function() end }',
      's.lua:2: mcp.tool a: scopes must be a list of scope names, e.g. {"notes:write"}' },
    { 'mcp.tool { name = "a", scopes = { "notes write" }, handler = function() end }',
      's.lua:2: mcp.tool a: scopes [1] must be a non-empty scope name without spaces, quotes or backslashes, got "notes write"' },
    { 'mcp.resource { uri = "a://b", name = "b", scopes = { "" }, read = function() end }',
      "s.lua:2: mcp.resource b: scopes [1] must be a non-empty scope name" },
    { 'mcp.template { uriTemplate = "a://{x}", name = "t", scopes = { read = true }, read = function() end }',
      "s.lua:2: mcp.template t: scopes must be a list (no keys)" },
    { 'mcp.prompt { name = "p", scopes = { 5 }, get = function() end }',
      "s.lua:2: mcp.prompt p: scopes [1] must be a non-empty scope name without spaces, quotes or backslashes, got number" },
    { 'mcp.tool { name = "a", scope = { "x" }, handler = function() end }',
      "s.lua:2: mcp.tool a: unknown field scope (did you mean scopes?)" },
  } do
    it("refuses " .. case[1], function()
      local code, stderr = load(case[1])
      assert.are.equal(1, code)
      assert.truthy(stderr:find(case[2], 1, true), stderr)
    end)
  end
end)
