-- The tree is the architecture: runtime/tools/check-layers.sh (run by
-- `make test` on the real tree) must fail when a file breaks its layer's
-- rules. Each case copies runtime/ aside, breaks one rule, and runs it.

local client = require "mcp_client"

local function sh(command)
  local p = io.popen(command .. " 2>&1")
  local out = p:read("a")
  local ok, _, code = p:close()
  return ok and 0 or code, out
end

-- Append a line after the first #include of a file in a copy of runtime/.
local function check_with(file, line)
  local dir = client.temp_dir()
  assert(os.execute("cp -r runtime " .. dir .. "/runtime"))
  local path = dir .. "/runtime/" .. file
  local text = client.read_file(path)
  text = text:gsub("(#include [^\n]*\n)", "%1" .. line .. "\n", 1)
  client.write_file(path, text)
  local code, out = sh("runtime/tools/check-layers.sh " .. dir .. "/runtime")
  client.remove_tree(dir)
  return code, out
end

describe("the layer check", function()
  it("passes on the tree as it is", function()
    local code, out = sh("runtime/tools/check-layers.sh")
    assert.are.equal(0, code, out)
    assert.matches("layers: %d+ passed, 0 failed", out)
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
