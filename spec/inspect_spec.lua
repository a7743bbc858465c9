-- luamcp inspect PATH [--json]: what a folder serves, without serving it,
-- run the way a user would (from another directory).

local client = require "mcp_client"
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
    local out
    code, out = sh(LUAMCP .. " inspect --help")
    assert.are.equal(0, code)
    assert.truthy(out:find("Usage: luamcp inspect", 1, true), out)
  end)
end)
