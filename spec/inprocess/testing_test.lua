-- mcp.testing, run the way users run their own specs: `luamcp test`
-- (spec/run-all.sh runs this folder with --pattern=_test, in the release
-- and the ASan build). Each test drives a server loaded in this process.
local testing = require "mcp.testing"

local FIXTURE = "spec/fixtures/testing"

describe("mcp.testing", function()
  it("calls tools, reads resources and gets prompts of a folder served in process", function()
    local t = testing.server("scripts/demo")
    assert.equal("demo", t.server_info.name)
    assert.equal("5", testing.text(t:call("add", { a = 2, b = 3 })))
    local roll = t:call("roll_dice", { count = 2, sides = 6 })
    assert.equal(2, #roll.structuredContent.rolls)
    assert.truthy(t:tools().countdown)
    assert.truthy(t:resources()["notes://index"])
    assert.truthy(t:templates()["notes://{name}"])
    t:call("write_note", { name = "groceries", text = "eggs" })
    assert.equal("eggs", testing.text(t:read("notes://groceries")))
    local prompt = t:prompt("summarize_note", { name = "groceries" })
    assert.equal("user", prompt.messages[1].role)
    t:close()
  end)

  it("returns tool errors as results and raises protocol errors with their code", function()
    local t = testing.server(FIXTURE)
    local r = t:call("broken")
    assert.is_true(r.isError)
    assert.equal("the disk is full", testing.text(r))
    local invalid = t:call("steps", { n = "three" })
    assert.is_true(invalid.isError)
    local ok, err = pcall(t.read, t, "fixture://nothing")
    assert.is_false(ok)
    assert.equal(-32002, err.code)
    local none, raw = t:request("prompts/get", { name = "nope" })
    assert.is_nil(none)
    assert.equal(-32602, raw.code)
    t:close()
  end)

  it("captures progress and log notifications in the order they came", function()
    local t = testing.server(FIXTURE)
    t:set_log_level("info")
    local r = t:call("steps", { n = 3 })
    assert.same({ steps = 3 }, r.structuredContent)
    local seen = {}
    for _, n in ipairs(t.notifications) do
      if n.method == "notifications/progress" then seen[#seen + 1] = "progress " .. n.params.progress
      elseif n.method == "notifications/message" then seen[#seen + 1] = n.params.data end
    end
    assert.same({ "progress 1", "step 1", "progress 2", "step 2", "progress 3", "step 3" }, seen)
    assert.equal(3, #t:received("notifications/progress"))
    t:clear()
    assert.equal(0, #t.notifications)
    t:close()
  end)

  it("answers elicitation, sampling and roots with the stubs the test gives", function()
    local asked = {}
    local t = testing.server(FIXTURE, {
      elicit = function(params)
        asked[#asked + 1] = params.message
        return { action = "accept", content = { name = "Ada" } }
      end,
      sample = function(params)
        return { role = "assistant", model = "stub", content = { type = "text", text = "4" } }
      end,
      roots = { "file:///work/a", { uri = "file:///work/b", name = "b" } },
    })
    assert.equal("Hello, Ada!", testing.text(t:call("ask_name")))
    assert.same({ "What is your name?" }, asked)
    assert.equal("The model said 4", testing.text(t:call("ask_model")))
    assert.equal("file:///work/a file:///work/b", testing.text(t:call("list_roots")))
    t:close()
  end)

  it("without a stub the tool hears that the client cannot answer", function()
    local t = testing.server(FIXTURE)
    local r = t:call("ask_name")
    assert.is_true(r.isError)
    assert.truthy(testing.text(r):find("elicitation", 1, true))
    t:close()
  end)

  it("reloads a changed file in place and reports the lists that changed", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir " .. dir))
    local function write(text)
      local f = assert(io.open(dir .. "/tools.lua", "w"))
      f:write(text)
      f:close()
    end
    write([[local mcp = require "mcp"
      mcp.tool { name = "version", handler = function() return "one" end }]])
    local t = testing.server(dir)
    assert.equal("one", testing.text(t:call("version")))
    write([[local mcp = require "mcp"
      mcp.tool { name = "version", handler = function() return "two" end }
      mcp.tool { name = "added", handler = function() return "new" end }]])
    t:reload()
    assert.equal("two", testing.text(t:call("version")))
    assert.equal("new", testing.text(t:call("added")))
    assert.equal(1, #t:received("notifications/tools/list_changed"))
    -- A broken edit fails the reload and the last good version keeps serving.
    write("this is not Lua")
    assert.has_error(function() t:reload() end)
    assert.equal("two", testing.text(t:call("version")))
    t:close()
    os.execute("rm -rf " .. dir)
  end)

  it("raises a loading error with the script's file and line", function()
    local ok, err = pcall(testing.server, "spec/fixtures/build_broken")
    assert.is_false(ok)
    assert.truthy(tostring(err):find("build_broken/[%w_]+%.lua:%d+"), tostring(err))
  end)

  it("serves several servers at once, each with its own state", function()
    local a, b = testing.server("scripts/demo"), testing.server("scripts/demo")
    a:call("write_note", { name = "only-in-a", text = "x" })
    assert.equal("x", testing.text(a:read("notes://only-in-a")))
    local ok = pcall(b.read, b, "notes://only-in-a")
    assert.is_false(ok)
    a:close()
    assert.equal("5", testing.text(b:call("add", { a = 2, b = 3 })))
    b:close()
  end)
end)

-- The LuaLS definitions of mcp.testing (lua/meta/mcp_testing.lua) declare
-- every public function it has, and nothing it lacks.
describe("mcp.testing's LuaLS definitions", function()
  it("match the module", function()
    local declared = {}
    for line in io.lines("lua/meta/mcp_testing.lua") do
      local owner, sep, name = line:match("^function (%w+)([.:])([%w_]+)%(")
      if owner then declared[(owner == "testing" and "testing." or "Server:") .. name] = true end
    end
    local actual = {}
    for name, v in pairs(testing) do
      if type(v) == "function" and not name:match("^_") then actual["testing." .. name] = true end
    end
    local t = testing.server("scripts/demo")
    -- The methods of a server: its class's and the client's it extends.
    local class = getmetatable(t)
    for _, methods in ipairs { class, getmetatable(class).__index } do
      for name, v in pairs(methods) do
        if type(v) == "function" and not name:match("^_") then actual["Server:" .. name] = true end
      end
    end
    t:close()
    local missing, extra = {}, {}
    for name in pairs(actual) do if not declared[name] then missing[#missing + 1] = name end end
    for name in pairs(declared) do if not actual[name] then extra[#extra + 1] = name end end
    table.sort(missing)
    table.sort(extra)
    assert.same({}, missing)
    assert.same({}, extra)
  end)
end)
