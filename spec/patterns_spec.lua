-- string.find, match, gmatch and gsub inside luamcp are our step-counting
-- matcher (runtime/app/lua_pattern.c). They must give exactly what Lua
-- 5.4's own give; busted runs on Lua 5.4, so its string library is the
-- reference. (fuzz_lua_pattern compares the two on random inputs.)

local client = require "mcp_client"

-- One case run with the string library of whatever Lua runs it: in the
-- server (luamcp's matcher) and here in busted (Lua's own).
local RUN = [[
local R = { ["table"] = { hello = "HI", x = false, n = 7 }, ["func"] = function(a, b) return b and (b .. a) or nil end }
return function(a)
  local f = string[a.fn]
  local out
  if a.fn == "gmatch" then
    out = table.pack(pcall(function()
      local all = {}
      for x, y in f(a.s, a.p, a.init) do all[#all + 1] = tostring(x) .. "/" .. tostring(y) end
      return table.concat(all, " ")
    end))
  elseif a.fn == "gsub" then
    out = table.pack(pcall(f, a.s, a.p, R[a.repl] or a.repl, a.max))
  else
    out = table.pack(pcall(f, a.s, a.p, a.init, a.plain))
  end
  local shown = {}
  for i = 1, out.n do shown[i] = type(out[i]) .. ":" .. tostring(out[i]) end
  return table.concat(shown, " ")
end
]]

local SCRIPT = "local mcp = require 'mcp'\nlocal run = (function()\n" .. RUN .. "\nend)()\n" .. [[
mcp.tool { name = "run", inputSchema = { type = "object" }, handler = function(a) return run(a) end }
]]

local CASES = {
  { fn = "find", s = "hello world", p = "o w" },
  { fn = "find", s = "hello world", p = "l+" },
  { fn = "find", s = "hello world", p = "(l)(l)()", init = -8 },
  { fn = "find", s = "a.b", p = ".", init = 2, plain = true },
  { fn = "find", s = "abc", p = "", init = 10 },
  { fn = "find", s = "THE (quick) fox", p = "%((%a+)%)" },
  { fn = "match", s = "key = value", p = "^(%w+)%s*=%s*(%w+)$" },
  { fn = "match", s = "  trim  ", p = "^%s*(.-)%s*$" },
  { fn = "match", s = "f(a(b)c)d", p = "%b()" },
  { fn = "match", s = "THE (quick) fox", p = "%f[%a]%a+%f[%A]", init = 5 },
  { fn = "match", s = "abcabc", p = "(abc)%1" },
  { fn = "match", s = "x]y", p = "[]]" },
  { fn = "match", s = "a-z", p = "[a%-z]+" },
  { fn = "match", s = "2024-11-25", p = "(%d+)-(%d+)-(%d+)" },
  { fn = "match", s = "aaa", p = "a-b" },
  { fn = "gsub", s = "a\0b\0", p = "%z", repl = "0" },
  { fn = "match", s = "\0\0Sd", p = "%**%Zd" },
  { fn = "match", s = "x", p = "[a" },
  { fn = "match", s = "x", p = "%" },
  { fn = "match", s = "x", p = "(x" },
  { fn = "match", s = "x", p = "x)" },
  { fn = "match", s = "x", p = "%1" },
  { fn = "match", s = "x", p = "%fx" },
  { fn = "match", s = "x", p = "%b" },
  { fn = "gmatch", s = "one two  three", p = "%a+" },
  { fn = "gmatch", s = "k1=v1, k2=v2", p = "(%w+)=(%w+)" },
  { fn = "gmatch", s = "abc", p = "x*" },
  { fn = "gmatch", s = "abcabc", p = "b", init = 3 },
  { fn = "gsub", s = "hello world", p = "o", repl = "0" },
  { fn = "gsub", s = "hello world", p = "(%w+)", repl = "<%1>", max = 1 },
  { fn = "gsub", s = "hello world", p = "%w+", repl = "%0 %0" },
  { fn = "gsub", s = "abc", p = "", repl = "-" },
  { fn = "gsub", s = "hello x n", p = "%w+", repl = "table" },
  { fn = "gsub", s = "a=1, b=2", p = "(%w+)=(%w+)", repl = "func" },
  { fn = "gsub", s = "abc", p = "b", repl = "%2" },
  { fn = "gsub", s = "abc", p = "b", repl = "%x" },
  { fn = "gsub", s = "^abc^", p = "^^", repl = "!" },
  { fn = "gsub", s = "x()y", p = "()", repl = "%1" },
}

local reference = assert(load(RUN, "=run"))()

describe("string patterns in luamcp", function()
  local dir, server
  setup(function()
    dir = client.temp_dir()
    client.write_file(dir .. "/patterns.lua", SCRIPT)
    server = client.spawn { "run", dir }
    server:initialize()
  end)
  teardown(function()
    server:close()
    client.remove_tree(dir)
  end)

  it("give what Lua 5.4's string library gives, errors included", function()
    assert.truthy(_VERSION == "Lua 5.4", "the reference must be Lua 5.4, busted runs " .. _VERSION)
    for _, case in ipairs(CASES) do
      local got = server:call_tool("run", case).content[1].text
      assert.are.equal(reference(case), got, client.json.encode(case))
    end
  end)
end)
