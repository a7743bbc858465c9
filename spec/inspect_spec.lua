-- luamcp inspect PATH [--json]: what a folder serves, without serving it,
-- run the way a user would (from another directory); and inspect of any
-- server `luamcp call` reaches (-- COMMAND, --http URL), and of a folder
-- that mounts another server.

local client = require "mcp_client"
local http = require "http_client"
local cjson = client.json

local sh = client.sh

local LUAMCP = io.popen("readlink -f " .. client.LUAMCP):read("l")
local DEMO = io.popen("readlink -f scripts/demo"):read("l")

describe("luamcp inspect", function()
  it("lists the tools with their arguments, the resources, templates and prompts", function()
    local code, out = sh("cd / && " .. LUAMCP .. " inspect " .. DEMO)
    assert.are.equal(0, code)
    for _, line in ipairs {
      "demo 1.0.0 — luamcp demo",
      "Tools (6)",
      "    a task for clients that support tasks, once it runs 1000 ms",
      "  add — Add",
      "    a: integer, required",
      "    sides: integer, default 6, 2..1000",
      "    returns structured content",
      "Resources (3)",
      "  notes://index (text/plain) — All notes",
      "Resource templates (1)",
      "  notes://{name} — A note",
      "Prompts (1)",
      "    name (required) — The note's name",
    } do
      assert.truthy(out:find("\n" .. line:gsub("%p", "%%%0") .. "\n") or out:find("^" .. line:gsub("%p", "%%%0") .. "\n"),
        line .. "\n--\n" .. out)
    end
  end)

  it("prints what clients get with --json", function()
    local code, out = sh(LUAMCP .. " inspect --json " .. DEMO)
    assert.are.equal(0, code)
    local view = cjson.decode(out)
    assert.are.equal("demo", view.server.name)
    local names = {}
    for _, t in ipairs(view.tools) do names[#names + 1] = t.name end
    assert.are.same({ "countdown", "add", "roll_dice", "write_note", "delete_note", "report" }, names)
    assert.are.same({ "a", "b" }, view.tools[2].inputSchema.required)
    assert.are.equal("notes://{name}", view.resourceTemplates[1].uriTemplate)
    assert.are.equal("summarize_note", view.prompts[1].name)
  end)

  it("fails on a broken folder with the message run prints, and explains itself", function()
    local code, _, err = sh(LUAMCP .. " inspect spec/fixtures/build_broken")
    assert.are.equal(1, code)
    assert.truthy(err:find("broken.lua:4:", 1, true), err)
    code, _, err = sh(LUAMCP .. " inspect")
    assert.are.equal(2, code)
    assert.truthy(err:find("Usage: luamcp inspect PATH [--json]", 1, true), err)
    code, _, err = sh(LUAMCP .. " inspect --bogus " .. DEMO)
    assert.are.equal(2, code)
    assert.truthy(err:find("unknown option --bogus", 1, true), err)
    local out
    code, out = sh(LUAMCP .. " inspect --help")
    assert.are.equal(0, code)
    assert.truthy(out:find("Usage: luamcp inspect", 1, true), out)
  end)
end)

-- The lines of the demo's inspection that any client can see (the
-- permissions and a tool's task threshold are known only where the
-- scripts are loaded).
local SEEN_BY_ANY_CLIENT = {
  "demo 1.0.0 — luamcp demo",
  "Tools (6)",
  "  add — Add",
  "    a: integer, required",
  "    sides: integer, default 6, 2..1000",
  "    returns structured content",
  "Resources (3)",
  "  notes://index (text/plain) — All notes",
  "Resource templates (1)",
  "  notes://{name} — A note",
  "Prompts (1)",
  "    name (required) — The note's name",
}

local function assert_lines(out, lines)
  for _, line in ipairs(lines) do
    assert.truthy(out:find("\n" .. line:gsub("%p", "%%%0") .. "\n") or out:find("^" .. line:gsub("%p", "%%%0") .. "\n"),
      line .. "\n--\n" .. out)
  end
end

describe("luamcp inspect of a server reached as luamcp call reaches it", function()
  it("inspects a stdio server after --", function()
    local code, out, err = sh("cd / && " .. LUAMCP .. " inspect -- " .. LUAMCP .. " run " .. DEMO)
    assert.are.equal(0, code, err)
    assert_lines(out, SEEN_BY_ANY_CLIENT)
    code, out, err = sh(LUAMCP .. " inspect --json -- " .. LUAMCP .. " run " .. DEMO)
    assert.are.equal(0, code, err)
    local view = cjson.decode(out)
    assert.are.equal("demo", view.server.name)
    assert.are.same({ "a", "b" }, view.tools[2].inputSchema.required)
    assert.are.equal("notes://{name}", view.resourceTemplates[1].uriTemplate)
    assert.are.equal("summarize_note", view.prompts[1].name)
  end)

  it("inspects a Streamable HTTP server with --http, headers and all", function()
    local s = http.start { DEMO }
    finally(function() s:stop_cleanly() end)
    local code, out, err = sh(LUAMCP .. " inspect --http " .. s.url .. " --header 'X-Test: 1'")
    assert.are.equal(0, code, err)
    assert_lines(out, SEEN_BY_ANY_CLIENT)
    code, out, err = sh(LUAMCP .. " inspect --json --http " .. s.url)
    assert.are.equal(0, code, err)
    assert.are.equal("countdown", cjson.decode(out).tools[1].name)
  end)

  it("says why when the server cannot be reached", function()
    local code, _, err = sh(LUAMCP .. " inspect -- /nonexistent/server")
    assert.are.equal(1, code)
    assert.truthy(err:find("luamcp inspect: ", 1, true), err)
  end)
end)

describe("luamcp inspect of a folder that mounts another server", function()
  local inner, outer
  setup(function()
    inner, outer = client.temp_dir(), client.temp_dir()
    client.write_file(inner .. "/inner.lua", [[
local mcp = require "mcp"
mcp.tool { name = "greet", description = "Greets", args = { who = "string" }, handler = function(a) return a.who end }
mcp.resource { uri = "inner://hello", name = "hello", description = "From inside", read = function() return "hi" end }
mcp.template { uriTemplate = "inner://notes/{id}", name = "note", read = function(v) return v.id end }
mcp.prompt { name = "hi", args = { who = "string" }, get = function(a) return "hi " .. a.who end }
]])
    client.write_file(outer .. "/outer.lua", ([[
local mcp = require "mcp"
mcp.server { name = "outer", version = "2.0.0" }
mcp.tool { name = "local_tool", description = "Mine", handler = function() return "mine" end }
mcp.mount { prefix = "in", client = mcp.client.connect { command = { %q, "run", %q } } }
]]):format(LUAMCP, inner))
  end)
  teardown(function()
    client.remove_tree(inner)
    client.remove_tree(outer)
  end)

  it("shows the mounted tools, resources, templates and prompts beside its own", function()
    local code, out, err = sh("cd / && " .. LUAMCP .. " inspect " .. outer)
    assert.are.equal(0, code, err)
    assert_lines(out, {
      "outer 2.0.0",
      "Permissions: none declared: runs unconfined",
      "Tools (2)",
      "  local_tool — Mine",
      "  in_greet — Greets",
      "    who: string, required",
      "Resources (1)",
      "  inner://hello — From inside",
      "Resource templates (1)",
      "  inner://notes/{id}",
      "Prompts (1)",
      "  in_hi",
    })
    code, out, err = sh(LUAMCP .. " inspect --json " .. outer)
    assert.are.equal(0, code, err)
    local view = cjson.decode(out)
    local names = {}
    for _, t in ipairs(view.tools) do names[#names + 1] = t.name end
    assert.are.same({ "local_tool", "in_greet" }, names)
    assert.are.equal("inner://hello", view.resources[1].uri)
    assert.are.equal("in_hi", view.prompts[1].name)
  end)
end)
