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
