-- Every busted run is Lua 5.4, whatever `lua` the machine runs busted with:
-- Debian's busted starts with `#!/usr/bin/env lua`, and /usr/bin/lua is
-- lua5.2 on a machine where lua-busted pulled lua5.2 in first. Here a `lua`
-- that is Lua 5.2 comes first on PATH, and plain `busted` runs specs from
-- the clone's root: .busted starts busted again under lua5.4, with every
-- argument as it was given, and its exit status comes back.

local client = require "mcp_client"

local function quote(s) return "'" .. s:gsub("'", [['\'']]) .. "'" end

local function which(name)
  local code, out = client.sh("command -v " .. name)
  return code == 0 and out:gsub("%s+$", "") or nil
end

describe("busted from the clone's root, under a lua that is 5.2", function()
  local dir, spec, lua52, busted
  setup(function()
    lua52, busted = which("lua5.2"), which("busted")
    dir = client.temp_dir()
    if lua52 then
      assert(os.execute("ln -s " .. quote(lua52) .. " " .. quote(dir .. "/lua")))
    end
    spec = dir .. "/version_spec.lua"
    client.write_file(spec, [[
describe("the inner run", function()
  it("runs under Lua 5.4, with the helpers' modules", function()
    assert.are.equal("Lua 5.4", _VERSION)
    assert.is_table(require("luv"))
    local f = assert(io.open("/proc/self/stat"))
    assert.is_string(f:read("a")) -- "a": 5.4's spelling ("*a" in 5.2)
    f:close()
  end)
  it("fails when asked to", function()
    assert.is_nil(os.getenv("INNER_FAIL"))
  end)
  it("starts busted under Lua 5.4 again, as a spec that runs busted does", function()
    if os.getenv("INNER_NESTED") then return end
    local me = debug.getinfo(1, "S").source:gsub("^@", "")
    local p = assert(io.popen("INNER_NESTED=1 busted -o TAP --filter='runs under Lua 5.4' '" .. me .. "' 2>&1"))
    local out = p:read("a")
    local ok = p:close()
    assert.is_true(ok, out)
    assert.truthy(out:find("ok 1 - the inner run runs under Lua 5.4", 1, true), out)
  end)
end)
]])
  end)
  teardown(function() client.remove_tree(dir) end)

  local function run(args, env)
    if not lua52 or not busted then
      return nil, ("needs lua5.2 and busted on PATH (make test-deps installs both)")
    end
    -- The `lua` on PATH is 5.2.
    local cmd = ("env %s PATH=%s:\"$PATH\" %s -o TAP %s %s"):format(
      env or "", quote(dir), quote(busted), args, quote(spec))
    return client.sh(cmd)
  end

  it("the lua first on PATH is 5.2", function()
    if not lua52 then return pending("no lua5.2 (make test-deps installs it)") end
    local code, out = client.sh("PATH=" .. quote(dir) .. ":\"$PATH\" lua -v")
    assert.are.equal(0, code)
    assert.truthy(out:find("Lua 5.2", 1, true), out)
  end)

  it("runs the specs under Lua 5.4", function()
    local code, out, err = run("")
    if not code then return pending(out) end
    assert.are.equal(0, code, out .. err)
    assert.truthy(out:find("ok 1 - the inner run runs under Lua 5.4", 1, true), out .. err)
    assert.truthy(out:find("ok 2 - the inner run fails when asked to", 1, true), out .. err)
  end)

  it("keeps an argument with spaces whole (a test chosen by name)", function()
    local code, out, err = run("--filter=" .. quote("runs under Lua"))
    if not code then return pending(out) end
    assert.are.equal(0, code, out .. err)
    assert.truthy(out:find("ok 1 - the inner run runs under Lua 5.4", 1, true), out .. err)
    assert.falsy(out:find("fails when asked", 1, true), out)
    assert.truthy(out:find("1..1", 1, true), out)
  end)

  it("passes a failure's exit status back", function()
    local code, out, err = run("", "INNER_FAIL=1")
    if not code then return pending(out) end
    assert.are_not.equal(0, code, out .. err)
    assert.truthy(out:find("not ok 2 - the inner run fails when asked to", 1, true), out .. err)
  end)
end)
