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
  -- Strings shorter than a scan vector (16 bytes) and just past it, with
  -- every kind of byte the writer must escape or replace, as values and keys.
  short = function()
    return { "", "a", "\"", "\\", "a\nb\tc", "\0", "\31", "\127", "\u{e9}", "\xff", "\xc3",
      "fifteen bytes!!", "sixteen bytes!!!", "fifteen bytes!\"", "sixteen bytes!!\"" }
  end,
  short_keys = function() return { ["\n"] = 1, ["\u{e9}"] = 2, ["\xff"] = 3, ["\""] = 4, [""] = 5 } end,
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

  it("escapes short strings, values and keys, as long ones", function()
    assert.are.equal('["","a","\\"","\\\\","a\\nb\\tc","\\u0000","\\u001f","\127","\u{e9}","\u{fffd}","\u{fffd}",'
      .. '"fifteen bytes!!","sixteen bytes!!!","fifteen bytes!\\"","sixteen bytes!!\\""]', encode("short"))
    assert.are.equal('{"":5,"\\n":1,"\\"":4,"\u{e9}":2,"\u{fffd}":3}', encode("short_keys"))
  end)

  it("refuses a table whose number and string keys would be the same JSON key", function()
    local text = encode("clash")
    assert.truthy(text:find("^error: .*both \"1\""), text)
  end)
end)
