-- The Lua <-> JSON bridge seen from a tool: tables with number keys (sparse
-- or mixed tables become objects) keep every key with its own value.

local client = require "mcp_client"

local SCRIPT = [[
local mcp = require "mcp"
local cases = {
  sparse = function() return { [1] = "a", [2] = "b", [10] = "c", [30] = "d", [200] = "e" } end,
  mixed = function() return { [1] = "one", [3] = "three", x = "ex", [0.5] = "half", [-7] = "minus" } end,
  huge = function() return { [math.maxinteger] = "max", [math.mininteger] = "min", [2^63] = "float" } end,
  infinite = function() return { [math.huge] = "up", [-math.huge] = "down" } end,
  clash = function() return { [1] = "number", ["1"] = "string" } end,
}
mcp.tool { name = "encode", inputSchema = { type = "object" }, handler = function(args)
  local ok, text = pcall(mcp.json.encode, cases[args.case]())
  return ok and text or ("error: " .. text)
end }
]]

describe("the JSON bridge", function()
  local dir, server
  setup(function()
    dir = client.temp_dir()
    client.write_file(dir .. "/bridge.lua", SCRIPT)
    server = client.spawn { "run", dir }
    server:initialize()
  end)
  teardown(function()
    server:close()
    client.remove_tree(dir)
  end)

  local function encode(case)
    local r = server:call_tool("encode", { case = case })
    return r.content[1].text
  end

  it("writes each number key of a sparse table with its own value, keys in byte order", function()
    assert.are.equal('{"1":"a","10":"c","2":"b","200":"e","30":"d"}', encode("sparse"))
    assert.are.equal('{"-7":"minus","0.5":"half","1":"one","3":"three","x":"ex"}', encode("mixed"))
  end)

  it("keeps integer keys exact at the ends of the integer range, and floats beyond it", function()
    assert.are.equal('{"-9223372036854775808":"min","9.223372036854776e+18":"float","9223372036854775807":"max"}',
      encode("huge"))
    assert.are.equal('{"-inf":"down","inf":"up"}', encode("infinite"))
  end)

  it("refuses a table whose number and string keys would be the same JSON key", function()
    local text = encode("clash")
    assert.truthy(text:find("^error: .*both \"1\""), text)
  end)
end)
