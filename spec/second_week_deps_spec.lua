-- Issue 30's dependencies and command-line items: `luamcp build` carries the
-- pure-Lua modules the scripts load (penlight's pl.stringx) into a program
-- that runs where they are not installed, refuses a C module, leaves out
-- what .luamcpignore lists and names its output itself; every command
-- suggests the option meant; init's next steps and `luamcp test` work as
-- written with no luamcp on PATH.

local client = require "mcp_client"

local sh = client.sh
local ROOT = io.popen("pwd"):read("l")
local LUAMCP = client.LUAMCP:sub(1, 1) == "/" and client.LUAMCP or ROOT .. "/" .. client.LUAMCP

local function quote(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

-- Where Debian (and a /usr/local install) put Lua 5.4's modules: the
-- default package.path and package.cpath of Lua 5.4 on Debian.
local LUA_PATH_54 = "/usr/local/share/lua/5.4/?.lua;/usr/local/share/lua/5.4/?/init.lua;"
  .. "/usr/share/lua/5.4/?.lua;/usr/share/lua/5.4/?/init.lua"
local LUA_CPATH_54 = "/usr/local/lib/lua/5.4/?.so;/usr/lib/x86_64-linux-gnu/lua/5.4/?.so;"
  .. "/usr/lib/aarch64-linux-gnu/lua/5.4/?.so;/usr/lib/lua/5.4/?.so"
-- An environment in which no Lua module can be found on the disk.
local NOWHERE = "/nonexistent-luamcp-spec/?.lua"

--- The file of a Debian package's module, installing the package (as root
--- only) when it is missing; nil and why when it cannot be had.
local function debian_module(module, path, deb)
  local file = package.searchpath(module, path)
  if file then return file end
  if sh("test \"$(id -u)\" = 0") == 0 then
    sh("DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends " .. deb .. " </dev/null")
    file = package.searchpath(module, path)
    if file then return file end
  end
  return nil, ("%s is not installed and could not be (apt-get install %s)"):format(deb, deb)
end

--- A command run in dir with an environment of its own (env -i: nothing of
--- ours leaks in); returns code, stdout, stderr.
local function run_in(dir, env, command)
  local words = { "cd", quote(dir), "&&", "env", "-i" }
  for _, e in ipairs(env) do words[#words + 1] = quote(e) end
  words[#words + 1] = command
  return sh(table.concat(words, " ") .. " </dev/null")
end

local function text_of(result)
  assert(result.content and result.content[1], client.json.encode(result))
  return result.content[1].text
end

local PENLIGHT_SERVER = [[
local mcp = require "mcp"
local stringx = require "pl.stringx"
mcp.server { name = "titles" }
mcp.tool {
  name = "title", description = "Title case, by penlight",
  inputSchema = { type = "object", properties = { s = { type = "string" } }, required = { "s" } },
  handler = function(args) return stringx.title(args.s) end,
}
mcp.tool {
  name = "show", description = "A Lua value as text, by penlight, required only when called",
  handler = function() return require("pl.pretty").write({ 1, 2 }, "") end,
}
]]

describe("luamcp build of scripts that require a Debian pure-Lua module", function()
  local dir
  before_each(function() dir = client.temp_dir() end)
  after_each(function() client.remove_tree(dir) end)

  it("carries pl.stringx into a program that runs where penlight is not installed", function()
    local stringx, why = debian_module("pl.stringx", LUA_PATH_54, "lua-penlight")
    if not stringx then
      print("skipped: " .. why)
      pending(why)
      return
    end
    -- A private copy of penlight, on LUA_PATH for the build only: removed
    -- before the program runs, and the system's is out of its reach.
    local lib = dir .. "/lib"
    assert(os.execute(("mkdir -p %s && cp -rL %s %s"):format(quote(lib), quote(stringx:match("^(.*)/stringx%.lua$")),
      quote(lib .. "/pl"))))
    local work = dir .. "/work"
    assert(os.execute(("mkdir -p %s/app/spec %s/home %s/elsewhere"):format(quote(work), quote(dir), quote(dir))))
    client.write_file(work .. "/app/server.lua", PENLIGHT_SERVER)
    client.write_file(work .. "/app/spec/server_spec.lua", "error('specs are not shipped')\n")
    client.write_file(work .. "/app/README.md", "# titles\n")
    client.write_file(work .. "/app/.luamcpignore", "# not shipped\nspec/\nREADME.md\n")
    local lib_path = lib .. "/?.lua;" .. lib .. "/?/init.lua"
    local code, out, err = run_in(work, { "PATH=/usr/bin:/bin", "HOME=" .. dir .. "/home", "LUA_PATH=" .. lib_path,
      "LUA_PATH_5_4=" .. lib_path }, quote(LUAMCP) .. " build app")
    assert.are.equal(0, code, out .. err)
    -- No -o: the folder's name; "app" is the folder itself here, so app/app.
    assert.truthy(err:find("wrote app/app:", 1, true), err)
    assert.truthy(err:find("pl.stringx (" .. lib .. "/pl/stringx.lua)", 1, true), err)
    local program = work .. "/app/app"
    local _, listing = sh(quote(program) .. " --bundle-info")
    for _, carried in ipairs { ".luamcp/lua/pl/stringx.lua", ".luamcp/lua/pl/utils.lua", ".luamcp/lua/pl/pretty.lua",
                               "  server.lua" } do
      assert.truthy(listing:find(carried, 1, true), carried .. " in\n" .. listing)
    end
    assert.falsy(listing:find("spec/", 1, true), listing)
    assert.falsy(listing:find("README.md", 1, true), listing)
    assert(os.execute("rm -rf " .. quote(lib)))

    -- The environment the program runs with reaches no penlight: the
    -- folder itself no longer loads in it.
    local env = { "PATH=/usr/bin:/bin", "HOME=" .. dir .. "/home", "LUA_PATH=" .. NOWHERE, "LUA_PATH_5_4=" .. NOWHERE }
    code, out, err = run_in(work, env, quote(LUAMCP) .. " call app title s=x")
    assert.are_not.equal(0, code, out)
    assert.truthy(err:find("module 'pl.stringx' not found", 1, true), err)

    -- The program, alone in another folder, with that environment.
    assert(os.execute(("cp %s %s"):format(quote(program), quote(dir .. "/elsewhere/titles"))))
    local argv = { "-i" }
    for _, e in ipairs(env) do argv[#argv + 1] = e end
    argv[#argv + 1] = "./titles"
    local server = client.spawn(argv, { bin = "/usr/bin/env", cwd = dir .. "/elsewhere" })
    local info = server:initialize()
    assert.are.equal("titles", info.serverInfo.name)
    assert.are.equal("Hello Lua World", text_of(server:call_tool("title", { s = "hello lua world" })))
    assert.are.equal("{1,2}", text_of(server:call_tool("show", {})))
    server:close()
  end)

  it("refuses a Lua C module, naming the module and its file", function()
    local lfs, why = debian_module("lfs", LUA_CPATH_54, "lua-filesystem")
    if not lfs then
      print("skipped: " .. why)
      pending(why)
      return
    end
    client.write_file(dir .. "/server.lua", 'local lfs = require "lfs"\nrequire("mcp").tool { name = "cwd", '
      .. 'handler = function() return lfs.currentdir() end }\n')
    local code, out, err = run_in(dir, { "PATH=/usr/bin:/bin", "LUA_CPATH=" .. LUA_CPATH_54 },
      quote(LUAMCP) .. " build . -o " .. quote(dir .. "/out"))
    assert.are.equal(1, code, out .. err)
    assert.truthy(err:find("lfs (" .. lfs .. ")", 1, true), err)
    assert.falsy(io.open(dir .. "/out"), "no program is written")

    -- Required only when a tool is called: a warning (it may be optional).
    client.write_file(dir .. "/server.lua", 'require("mcp").tool { name = "cwd", handler = function() '
      .. 'local ok, lfs = pcall(require, "lfs") return ok and lfs.currentdir() or "no lfs" end }\n')
    code, out, err = run_in(dir, { "PATH=/usr/bin:/bin", "LUA_CPATH=" .. LUA_CPATH_54 },
      quote(LUAMCP) .. " build . -o " .. quote(dir .. "/out"))
    assert.are.equal(0, code, out .. err)
    assert.truthy(err:find("warning: the scripts require the Lua C module lfs (" .. lfs .. ", named in ", 1, true), err)
  end)

  it("keeps out what .luamcpignore lists, and puts back what ! names", function()
    assert(os.execute(("mkdir -p %s/app/docs %s/app/lib/cache %s/app/lib/spec"):format(quote(dir), quote(dir),
      quote(dir))))
    local files = {
      ["server.lua"] = 'require("mcp").tool { name = "x", handler = function() return require("lib.util") end }\n'
        .. 'require "lib.util"\n',
      ["lib/util.lua"] = "return 'util'\n",
      ["lib/spec/util_spec.lua"] = "error('no')\n",
      ["lib/cache/a.bin"] = "x",
      ["docs/guide.md"] = "guide",
      ["docs/shot.png"] = "png",
      ["docs/keep.png"] = "png",
      ["notes.tmp"] = "tmp",
      [".luamcpignore"] = "spec/\ndocs/*.png\n!docs/keep.png\n**/cache/**\n*.tmp\n",
    }
    for name, text in pairs(files) do client.write_file(dir .. "/app/" .. name, text) end
    local code, out, err = run_in(dir, { "PATH=/usr/bin:/bin" }, quote(LUAMCP) .. " build app -o prog")
    assert.are.equal(0, code, out .. err)
    local _, listing = sh(quote(dir .. "/prog") .. " --bundle-info")
    local names = {}
    for name in listing:gmatch("%x+  (%S+)\n") do names[#names + 1] = name end
    assert.are.same({ "docs/guide.md", "docs/keep.png", "lib/util.lua", "server.lua" }, names)
  end)

  it("names the program after the script when -o is not given", function()
    client.write_file(dir .. "/tool.lua", 'require("mcp").tool { name = "x", handler = function() return 1 end }\n')
    local code, out, err = run_in(dir, { "PATH=/usr/bin:/bin" }, quote(LUAMCP) .. " build tool.lua")
    assert.are.equal(0, code, out .. err)
    assert.truthy(err:find("wrote tool:", 1, true), err)
    code = sh(quote(dir .. "/tool") .. " --bundle-info")
    assert.are.equal(0, code)
  end)
end)

describe("an unknown option", function()
  local cases = {
    { "run scripts/demo --allow-reed .", "unknown option --allow-reed (did you mean --allow-read?)" },
    { "dev scripts/demo --timout 5", "unknown option --timout (did you mean --timeout?)" },
    { "run scripts/demo --http=8080", "unknown option --http=8080 (did you mean --http 8080?)" },
    { "build scripts/demo --outptu x", "unknown option --outptu (did you mean --output?)" },
    { "install claude-code scripts/demo --nmae x", "unknown option --nmae (did you mean --name?)" },
    { "inspect scripts/demo --jsno", "unknown option --jsno (did you mean --json?)" },
    { "call scripts/demo add --rwa", "unknown option --rwa (did you mean --raw?)" },
    { "init hello --nme x", "unknown option --nme (did you mean --name?)" },
    { "biuld scripts/demo", "unknown command biuld (did you mean build?)" },
  }
  for _, c in ipairs(cases) do
    it("gets a suggestion: luamcp " .. c[1], function()
      local code, out, err = sh(quote(LUAMCP) .. " " .. c[1] .. " </dev/null")
      assert.are.equal(2, code, out .. err)
      assert.truthy(err:find(c[2], 1, true), err)
    end)
  end

  it("gets none when nothing is close", function()
    local code, _, err = sh(quote(LUAMCP) .. " run scripts/demo --frobnicate </dev/null")
    assert.are.equal(2, code)
    assert.truthy(err:find("unknown option --frobnicate\n", 1, true), err)
  end)
end)

describe("init's next steps and luamcp test, with no luamcp on PATH", function()
  local dir
  before_each(function() dir = client.temp_dir() end)
  after_each(function() client.remove_tree(dir) end)

  -- PATH without any folder that holds a luamcp.
  local function path_without_luamcp()
    local kept = {}
    for folder in ("/usr/local/bin:/usr/bin:/bin"):gmatch("[^:]+") do
      if not io.open(folder .. "/luamcp") then kept[#kept + 1] = folder end
    end
    return table.concat(kept, ":")
  end

  --- The commands init printed under "Next:".
  local function next_steps(out)
    local steps = {}
    local after = assert(out:match("\nNext:\n(.*)$"), out)
    for line in after:gmatch("[^\n]+") do
      if line:sub(1, 2) ~= "  " then break end
      steps[#steps + 1] = line:sub(3)
    end
    return steps
  end

  it("prints steps that run as written, and luamcp test runs from any folder", function()
    local env = { "PATH=" .. path_without_luamcp(), "HOME=" .. dir }
    local code, out, err = run_in(dir, env, "command -v luamcp")
    assert.are_not.equal(0, code, "luamcp is on PATH: " .. out)
    code, out, err = run_in(dir, env, quote(LUAMCP) .. " init hello")
    assert.are.equal(0, code, out .. err)
    local steps = next_steps(out)
    assert.are.equal("cd hello", steps[1])
    assert.are.equal(4, #steps, out)
    assert.truthy(out:find("make install PREFIX=~/.local", 1, true), out)
    -- Each step, in order, in one shell: cd moves the ones after it.
    local script = {}
    for i, step in ipairs(steps) do
      script[#script + 1] = step .. " </dev/null > " .. quote(dir .. "/step" .. i .. ".out") .. " 2>&1 || exit " .. i
    end
    code, out, err = run_in(dir, env, "sh -c " .. quote(table.concat(script, "\n")))
    if code ~= 0 then error("step " .. code .. ", " .. steps[code] .. ", failed:\n" .. client.read_file(dir .. "/step" .. code .. ".out")) end
    assert.truthy(client.read_file(dir .. "/step2.out"):find("3 successes / 0 failures", 1, true))
    assert.truthy(client.read_file(dir .. "/step3.out"):find("Hello, Ada!", 1, true))
    -- The project's README names luamcp as it can be run here too.
    local readme = client.read_file(dir .. "/hello/README.md")
    assert.falsy(readme:find("\nluamcp ", 1, true), readme)

    -- luamcp test from the parent, from elsewhere, and on the project itself.
    assert(os.execute("mkdir -p " .. quote(dir .. "/elsewhere")))
    for _, c in ipairs { { dir, "hello/spec" }, { dir, "hello" }, { dir .. "/elsewhere", dir .. "/hello/spec" },
                         { dir, "hello/spec/server_spec.lua" } } do
      code, out, err = run_in(c[1], env, quote(LUAMCP) .. " test " .. quote(c[2]))
      assert.are.equal(0, code, c[2] .. ":\n" .. out .. err)
      assert.truthy(out:find("3 successes / 0 failures", 1, true), c[2] .. ":\n" .. out)
    end
  end)

  it("names luamcp plainly when PATH finds this one", function()
    local bin = LUAMCP:match("^(.*)/[^/]+$")
    local code, out, err = run_in(dir, { "PATH=" .. bin .. ":/usr/bin:/bin", "HOME=" .. dir },
      "ln -s " .. quote(LUAMCP) .. " luamcp 2>/dev/null; PATH=" .. quote(dir) .. ":$PATH luamcp init hello")
    assert.are.equal(0, code, out .. err)
    assert.are.same({ "cd hello", "luamcp test", "luamcp call . greet name=Ada", "luamcp dev ." }, next_steps(out))
  end)

  it("says how to install busted when it cannot be found", function()
    local code, out, err = run_in(dir, { "PATH=/usr/bin:/bin", "LUA_PATH=" .. NOWHERE, "LUA_PATH_5_4=" .. NOWHERE },
      quote(LUAMCP) .. " test")
    assert.are.equal(1, code, out .. err)
    assert.truthy(err:find("apt-get install lua-busted", 1, true), err)
    assert.truthy(err:find("luarocks --lua-version 5.4 install busted", 1, true), err)
  end)

  it("is installed by make with the build's packages", function()
    local deps = client.read_file(ROOT .. "/runtime/tools/deps.sh")
    local build_pkgs = assert(deps:match('\nbuild_pkgs="([^"]*)"'))
    assert.truthy((" " .. build_pkgs .. " "):find(" lua-busted ", 1, true), build_pkgs)
  end)
end)
