-- The tree is the architecture: runtime/tools/check-layers.sh (run by
-- `make test` on the real tree) must fail when a file breaks its layer's
-- rules. Each case copies runtime/ aside, breaks one rule, and runs it; the
-- calls are read from the objects, so the copy takes build/obj along (after
-- the sources, so that they are newer) and compiles the files it adds.

local client = require "mcp_client"

local function sh(command)
  local p = io.popen(command .. " 2>&1")
  local out = p:read("a")
  local ok, _, code = p:close()
  return ok and 0 or code, out
end

-- Runs the check on a copy of runtime/ and build/obj/ after edit(dir) has
-- changed the copy of runtime/. added: C files edit() wrote, to compile.
local function check_tree(edit, added)
  local dir = client.temp_dir()
  assert(os.execute("cp -r runtime " .. dir .. "/runtime"))
  edit(dir)
  assert(os.execute("mkdir -p " .. dir .. "/build && cp -r build/obj " .. dir .. "/build/obj"))
  for _, module in ipairs(added or {}) do
    local code, out = sh(string.format("cc -std=c11 -c -o %s/build/obj/%s.o %s/runtime/%s.c", dir, module, dir, module))
    assert(code == 0, out)
  end
  local code, out = sh("runtime/tools/check-layers.sh " .. dir .. "/runtime")
  client.remove_tree(dir)
  return code, out
end

-- Append a line after the first #include of a file in a copy of runtime/.
local function check_with(file, line)
  return check_tree(function(dir)
    local path = dir .. "/runtime/" .. file
    local text = client.read_file(path)
    text = text:gsub("(#include [^\n]*\n)", "%1" .. line .. "\n", 1)
    client.write_file(path, text)
  end)
end

-- Adds modules to a copy of runtime/, each calling the others it names
-- ({["app/circle_a"] = {"app/circle_b"}}: circle_a.c calls circle_b_f()),
-- and lines to the copy's tools/call-loops.txt.
local function check_calls(modules, listed)
  local added = {}
  return check_tree(function(dir)
    for module, callees in pairs(modules) do
      local name = module:match("[^/]+$")
      local lines, body = {}, {}
      for _, callee in ipairs(callees) do
        local f = callee:match("[^/]+$") .. "_f"
        lines[#lines + 1] = "void " .. f .. "(void);"
        body[#body + 1] = "  " .. f .. "();"
      end
      lines[#lines + 1] = "void " .. name .. "_f(void) {\n" .. table.concat(body, "\n") .. "\n}"
      client.write_file(dir .. "/runtime/" .. module .. ".c", table.concat(lines, "\n") .. "\n")
      added[#added + 1] = module
    end
    if listed then
      local path = dir .. "/runtime/tools/call-loops.txt"
      client.write_file(path, client.read_file(path) .. listed .. "\n")
    end
  end, added)
end

describe("the layer check", function()
  it("passes on the tree as it is", function()
    local code, out = sh("runtime/tools/check-layers.sh")
    assert.are.equal(0, code, out)
    assert.matches("layers: %d+ passed, 0 failed", out)
    assert.matches("call loops between concerns: os/ %d+", out)
  end)

  it("fails when the core includes a Lua or libuv header", function()
    local code, out = check_with("core/json.c", "#include <uv.h>")
    assert.are_not.equal(0, code)
    assert.matches("core/json.c: the core may not use Lua, libuv or http_parser", out, 1, true)
    code, out = check_with("core/session.h", "#include <lauxlib.h>")
    assert.are_not.equal(0, code)
    assert.matches("core/session.h", out, 1, true)
  end)

  it("fails when a layer includes one above it or beside it", function()
    local code, out = check_with("core/session.c", '#include "app/app.h"')
    assert.are_not.equal(0, code)
    assert.matches("core/ may not include app/app.h", out, 1, true)
    code, out = check_with("transport/stdio_transport.c", '#include "app/vm.h"')
    assert.are_not.equal(0, code)
    assert.matches("transport/ may not include app/vm.h", out, 1, true)
  end)

  it("fails when includes between modules form a cycle", function()
    -- lua_task.c is below reload.c (reload -> vm -> lua_task): calling back
    -- up is what vm.on_drained exists to avoid.
    local code, out = check_with("app/lua_task.c", '#include "app/reload.h"')
    assert.are_not.equal(0, code)
    assert.matches("include cycle between modules", out, 1, true)
    assert.matches("app/lua_task", out, 1, true)
  end)

  it("fails on an include that does not name its layer", function()
    local code, out = check_with("app/vm.c", '#include "json.h"')
    assert.are_not.equal(0, code)
    assert.matches('does not name its layer', out, 1, true)
  end)

  it("fails when two files of different concerns call each other (a new call loop)", function()
    local code, out = check_calls({ ["app/circle_a"] = { "app/circle_b" }, ["app/circle_b"] = { "app/circle_a" } })
    assert.are_not.equal(0, code, out)
    assert.matches("NEW call loop in app/ between app/circle_a app/circle_b", out, 1, true)
    -- One call each way, so the developer sees why.
    assert.matches("app/circle_a -> app/circle_b (circle_b_f)", out, 1, true)
    assert.matches("app/circle_b -> app/circle_a (circle_a_f)", out, 1, true)
    assert.matches("layers: %d+ passed, 1 failed", out)
  end)

  it("finds a loop through a third file, and passes calls that go one way", function()
    local code, out = check_calls({ ["app/circle_a"] = { "app/circle_b" }, ["app/circle_b"] = { "app/circle_c" },
                                    ["app/circle_c"] = { "app/circle_a" }, ["app/circle_d"] = { "app/circle_a" } })
    assert.are_not.equal(0, code, out)
    assert.matches("NEW call loop in app/ between app/circle_a app/circle_b app/circle_c:", out, 1, true)
    assert.matches("app/circle_c -> app/circle_a (circle_a_f)", out, 1, true)
    code, out = check_calls({ ["app/circle_a"] = { "app/circle_b" }, ["app/circle_b"] = { "app/circle_c" } })
    assert.are.equal(0, code, out)
  end)

  it("passes a loop within one concern, named so in call-loops.txt", function()
    local modules = { ["app/circle_a"] = { "app/circle_b" }, ["app/circle_b"] = { "app/circle_a" } }
    local code, out = check_calls(modules, "concern app/circle_a app/circle_b")
    assert.are.equal(0, code, out)
    assert.matches("layers: %d+ passed, 0 failed", out)
    code, out = check_calls(modules, "concern app/circle_a app/circle_gone")
    assert.are_not.equal(0, code, out)
    assert.matches("app/circle_gone.c: no such file", out, 1, true)
  end)

  it("lets a listed loop shrink, says to lower its line, and fails when it grows", function()
    local two = { ["app/circle_a"] = { "app/circle_b" }, ["app/circle_b"] = { "app/circle_a" } }
    local code, out = check_calls(two, "loop app/circle_a app/circle_b")
    assert.are.equal(0, code, out)
    assert.matches("call loop in app/ between 2 files (listed", out, 1, true)
    assert.is_nil(out:find("has shrunk", 1, true), out)
    code, out = check_calls(two, "loop app/circle_a app/circle_b app/circle_c")
    assert.are.equal(0, code, out)
    assert.matches('lower it ("loop app/circle_a app/circle_b app/circle_c" is now app/circle_a app/circle_b)', out, 1, true)
    code, out = check_calls({ ["app/circle_a"] = { "app/circle_b" }, ["app/circle_b"] = { "app/circle_a", "app/circle_c" },
                              ["app/circle_c"] = { "app/circle_a" } }, "loop app/circle_a app/circle_b")
    assert.are_not.equal(0, code, out)
    assert.matches("has grown beyond tools/call-loops.txt (app/circle_a app/circle_b): now also app/circle_c", out, 1, true)
    assert.matches("app/circle_b -> app/circle_c (circle_c_f)", out, 1, true)
    assert.is_nil(out:find("has shrunk", 1, true), out)
  end)

  it("fails when a file calls a layer above it by name", function()
    local code, out = check_calls({ ["core/circle_low"] = { "app/circle_high" }, ["app/circle_high"] = {} })
    assert.are_not.equal(0, code, out)
    assert.matches("core/circle_low.c calls circle_high_f in app/circle_high.c: core/ may not call into app/", out, 1, true)
  end)

  it("fails when the objects are missing or older than their sources", function()
    local code, out = check_tree(function(dir)
      client.write_file(dir .. "/runtime/app/circle_new.c", "int circle_new;\n")
    end)
    assert.are_not.equal(0, code, out)
    assert.matches("app/circle_new.c: no object", out, 1, true)
    code, out = check_tree(function(dir)
      assert(os.execute("touch -d '+1 hour' " .. dir .. "/runtime/app/vm.c"))
    end)
    assert.are_not.equal(0, code, out)
    assert.matches("app/vm.c: newer than", out, 1, true)
  end)

  it("also stops the build of a core object that includes libuv", function()
    local dir = client.temp_dir()
    client.write_file(dir .. "/bad.c", "#include <uv.h>\nint x;\n")
    local code, out = sh("make -s build/core-guard/uv.h >/dev/null && cc -std=c11 -Iruntime -Ibuild/core-guard -c -o "
                         .. dir .. "/bad.o " .. dir .. "/bad.c")
    client.remove_tree(dir)
    assert.are_not.equal(0, code)
    assert.matches("may not include <uv.h>", out, 1, true)
  end)
end)
