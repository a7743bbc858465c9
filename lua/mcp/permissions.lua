-- mcp.permissions: least privilege for scripts. A server declares what its
-- tools may touch,
--
--   mcp.server { permissions = { read = { "./data", "$ROOTS" }, write = { "$TMP" },
--     exec = { "git" }, net = { "api.github.com:443" }, env = { "GITHUB_TOKEN" },
--     c_modules = { "luasql.sqlite3" } } }
--
-- and every door a script uses checks it: mcp.fs, io.open/io.lines/
-- io.input/io.output, loadfile/dofile, os.remove/os.rename/os.tmpname,
-- os.getenv, mcp.exec (by the resolved program), mcp.http (host and port,
-- each redirect included), require of C modules and package.loadlib. A
-- denied operation fails like an expected failure: nil, "permission
-- denied: read /etc/passwd (allowed: ...)", "EACCES" (a door that raises
-- on failure raises that message), and is logged once with the tool's name.
--
-- The doors are installed when the library loads, before any script runs,
-- and check the policy at each call: a server with no permissions runs
-- unconfined (as before, with a start-up line saying so); one that declares
-- them is held to them from that line on. The command line adds to them
-- (--allow-read and the others) or lifts them (--allow-all).
-- runtime/app/confine.c applies the file rules to the whole process with
-- Landlock as well, when the kernel has it.

local core = require "mcp.core"

local M = {}

M.KINDS = { "read", "write", "exec", "net", "env", "c_modules" }

-- The policy in force (nil: unconfined). Paths are absolute and resolved.
--   read, write: lists of folders or files; roots_read, roots_write: $ROOTS
--   exec: resolved program path -> true; net: list of {host, port|nil}
--   env: name -> true; c_modules: name -> true, or true for any
--   declared: what the script and the command line said, for messages
local policy

-- The functions behind the doors, kept here only: the doors below replace
-- them everywhere a script can reach (the globals, and mcp.core's table,
-- which a script can require too).
local raw = {
  io_open = io.open, io_lines = io.lines, io_input = io.input, io_output = io.output,
  loadfile = loadfile, dofile = dofile, os_remove = os.remove, os_rename = os.rename, os_tmpname = os.tmpname,
  os_getenv = os.getenv, loadlib = package.loadlib, exec = core.exec, http_request = core.http_request,
  getenv = core.getenv,
}
-- Permissions are declared while the scripts load, once; after that a
-- script cannot widen them.
local locked = false

---------------------------------------------------------------------------
-- Paths
---------------------------------------------------------------------------

-- How this platform reads a path (lua/mcp/path.lua): the one place for
-- separators, drives, case and the forms Windows accepts. Kept here only,
-- so a script cannot change the rules the checks use.
local paths = require("mcp.path").new(core.platform, { realpath = core.realpath, readlink = core.readlink })

local function tmp_dir()
  return paths.tmp_dir(raw.getenv)
end

local resolve = paths.resolve
M.resolve = resolve

local within = paths.within

-- A file:// root's path (percent-decoded), resolved.
local function root_path(uri)
  local p = paths.from_file_uri(uri)
  return p and resolve(p)
end

-- The roots of the client whose call is running, asked once per call
-- (ctx:roots(): a roots/list request, or an input_required round in the
-- 2026-07-28 era), so a client that changes its roots is followed at its
-- next call. Outside a call, or from a client without roots: none.
local roots_of_call = setmetatable({}, { __mode = "k" })
local function current_roots()
  local ctx = core.current_ctx()
  if not ctx then return {} end
  local cached = roots_of_call[ctx]
  if cached then return cached end
  local ok, roots = pcall(ctx.roots, ctx)
  -- Not asked (where the coroutine cannot wait, such as a table.sort
  -- comparator), or refused: none this time, and asked again next time.
  if not ok or type(roots) ~= "table" then return {} end
  local list = {}
  for _, r in ipairs(roots) do
    local p = type(r) == "table" and root_path(r.uri)
    if p then list[#list + 1] = p end
  end
  roots_of_call[ctx] = list
  return list
end

--- Before a tool's handler runs: a server whose permissions name $ROOTS
--- asks the client's roots now, where the call can wait for the answer (a
--- check inside a coroutine the tool makes, or a sort comparator, could
--- not), and before the handler has done anything (so a 2026-07-28
--- client's input_required round re-runs nothing).
-- The tool each running call is for, by its ctx (weak: a ctx ends with its call).
local tool_of_ctx = setmetatable({}, { __mode = "k" })

function M.before_call(ctx, tool)
  tool_of_ctx[ctx] = tool
  if policy and (policy.roots_read or policy.roots_write) then current_roots() end
end

---------------------------------------------------------------------------
-- Denials
---------------------------------------------------------------------------

local logged = {}

-- The tool whose call is running, or nil.
local function tool_name()
  local ctx = core.current_ctx()
  return ctx and tool_of_ctx[ctx]
end

local function allowed_text(kind)
  local list = policy.declared[kind]
  if kind == "c_modules" and list == true then return "any" end
  if type(list) ~= "table" or #list == 0 then return "none" end
  local shown = {}
  for i, v in ipairs(list) do shown[i] = v == "$ROOTS" and "roots" or v end
  return table.concat(shown, ", ")
end

-- nil, message, "EACCES"; logged once per tool and message. resolved:
-- the path target resolves to, when that is what the rules refused.
local function deny(kind, target, resolved)
  local message = ("permission denied: %s %s (%sallowed: %s)"):format(kind, target,
    resolved and ("resolves to " .. resolved .. "; ") or "", allowed_text(kind))
  local tool = tool_name()
  local key = (tool or "") .. "\0" .. message
  if not logged[key] then
    logged[key] = true
    core.stderr("warning", (tool and ("tool " .. tool .. ": ") or "") .. message)
  end
  return nil, message, "EACCES"
end

---------------------------------------------------------------------------
-- Checks (each returns true, or nil, message, "EACCES")
---------------------------------------------------------------------------

local function check_path(kind, path)
  if type(path) == "number" then path = tostring(path) end -- Lua would open "123"
  if not policy or type(path) ~= "string" then return true end
  local real = resolve(path)
  if real then
    local lists = kind == "read" and { policy.read, policy.write } or { policy.write }
    for _, list in ipairs(lists) do
      for _, dir in ipairs(list) do
        if within(real, dir) then return true end
      end
    end
    if policy.roots_write or (kind == "read" and policy.roots_read) then
      for _, dir in ipairs(current_roots()) do
        if within(real, dir) then return true end
      end
    end
  end
  -- The rules judged the resolved path: name it when it is not the one
  -- given (a link, "..", a relative path), or the message would seem to
  -- refuse a path it allows.
  return deny(kind, path, real and paths.key(real) ~= paths.key(path) and real or nil)
end
M.check_path = check_path

-- The program argv[1] names, resolved as execvp would: the path to run,
-- or nil, message, "EACCES".
local function check_exec(program)
  if not policy or type(program) ~= "string" then return program end
  local real = core.which(program)
  if real and policy.exec[paths.key(real)] then return real end
  return deny("exec", program)
end
M.check_exec = check_exec

local DEFAULT_PORTS = { http = 80, https = 443 }

--- Split an http(s) URL: scheme, host (lower case, no brackets), port.
--- For mcp.http's redirects, which drop credentials when the origin
--- changes; the net check judges libcurl's own parse (check_net).
function M.url_parts(url)
  url = tostring(url)
  if not url:find("://", 1, true) then url = "http://" .. url end -- a proxy may be given as host:port
  local scheme, rest = url:match("^(%a[%w+.-]*)://(.*)$")
  if not scheme then return nil end
  scheme = scheme:lower()
  local authority = rest:match("^([^/?#]*)"):gsub("^.*@", "")
  local host, port = authority:match("^%[(.-)%]:?(%d*)$")
  if not host then host, port = authority:match("^([^:]*):?(%d*)$") end
  port = tonumber(port) or DEFAULT_PORTS[scheme]
  return scheme, (host or ""):lower(), port
end

--- May a request reach host:port? host is in lower case without IPv6
--- brackets: runtime/app/lua_http.c calls this with the host and port of
--- the one parse of the URL (and of the proxy) that libcurl is handed, so
--- that what is judged is what is used.
local function check_net(host, port)
  if not policy then return true end
  for _, rule in ipairs(policy.net) do
    local host_ok = rule.host == host or (rule.host:sub(1, 2) == "*." and host:sub(-(#rule.host - 1)) == rule.host:sub(2))
    if host_ok and (rule.port == nil or rule.port == port) then return true end
  end
  return deny("net", (host:find(":", 1, true) and ("[" .. host .. "]") or host) .. ":" .. port)
end
M.check_net = check_net

-- A socket's path as the socket rules compare it: its folder resolved
-- (links, "..", a relative path against the working folder, which is
-- where libcurl connects from) and its name; a named pipe
-- (\\.\pipe\NAME) as written, in lower case (Windows ignores case).
local function socket_key(path)
  if path:sub(1, 9) == "\\\\.\\pipe\\" then return path:lower() end
  local dir, name = path:match("^(.*)/([^/]+)$")
  if not dir then dir, name = ".", path end
  local real = core.realpath(dir == "" and "/" or dir)
  if not real then return nil end
  return real:gsub("/$", "") .. "/" .. name
end

--- May a request reach the local socket (a Unix socket file, a named pipe)
--- at path? The net rules "unix:/path/x.sock" (that socket) and
--- "unix:/path/" (any socket in that folder or below) allow it.
local function check_socket(path)
  if not policy then return true end
  local key = socket_key(tostring(path))
  for _, rule in ipairs(policy.sockets) do
    if key and (key == rule.key or (rule.folder and key:sub(1, #rule.key) == rule.key)) then return true end
  end
  return deny("net", "unix:" .. tostring(path))
end
M.check_socket = check_socket

local function check_env(name)
  if not policy or policy.env[name] then return true end
  return deny("env", tostring(name))
end
M.check_env = check_env

local function check_c_module(name)
  if not policy or policy.c_modules == true or policy.c_modules[name] then return true end
  return deny("c_modules", tostring(name))
end

--- Is a policy in force?
function M.confined() return policy ~= nil end

--- mcp.paths: the user's folders, read from the environment as it was
--- given (not through os.getenv's check: a folder's name is no secret the
--- env list guards, and whatever is done in it is judged by read/write).
function M.user_folders() return paths.user_folders(raw.getenv) end

---------------------------------------------------------------------------
-- Declaring
---------------------------------------------------------------------------

local function list_of(kind, value, level)
  if value == nil then return {} end
  if kind == "c_modules" and value == true then return true end
  if type(value) ~= "table" then
    error(("mcp.server: permissions.%s must be a list of strings"):format(kind), level)
  end
  for i, v in ipairs(value) do
    if type(v) ~= "string" or v == "" then
      error(("mcp.server: permissions.%s[%d] must be a non-empty string"):format(kind, i), level)
    end
    local port = kind == "net" and tonumber(v:match(":(%d+)$"))
    if port and (port < 1 or port > 65535) then
      error(("mcp.server: permissions.net[%d]: %s: a port is 1 to 65535"):format(i, v), level)
    end
  end
  return value
end

-- The script's list and the command line's, each entry once, in the order
-- first given (a name in permissions.env and in config, or declared and
-- given with --allow-env, is listed once everywhere the lists are shown).
local function merge(a, b)
  if a == true or b == true then return true end
  local out, seen = {}, {}
  for _, list in ipairs { a or {}, b or {} } do
    for _, v in ipairs(list) do
      if not seen[v] then
        seen[v] = true
        out[#out + 1] = v
      end
    end
  end
  return out
end

local function overrides()
  local text = core.permission_overrides()
  return text and core.json_decode(text) or {}
end

-- Build the policy from what the script declared (or {}) plus the command
-- line; relative paths are relative to the script folder.
local function build(declared)
  local cli = overrides()
  if cli.all then return nil end
  local base = core.realpath(core.script_dir()) or core.script_dir()
  local p = { read = {}, write = {}, exec = {}, net = {}, sockets = {}, env = {}, c_modules = {}, declared = {} }
  for _, kind in ipairs(M.KINDS) do
    p.declared[kind] = merge(declared[kind], cli[kind])
  end
  for _, kind in ipairs { "read", "write" } do
    for _, entry in ipairs(p.declared[kind]) do
      if entry == "$ROOTS" then
        p["roots_" .. kind] = true
      else
        local path = entry == "$TMP" and tmp_dir() or paths.expand_home(entry, raw.getenv)
        local real = resolve(path, base)
        if real then p[kind][#p[kind] + 1] = real end
      end
    end
  end
  for _, entry in ipairs(p.declared.exec) do
    local real = core.which(paths.has_separator(entry) and resolve(entry, base) or entry)
    local key = real and paths.key(real)
    if key then p.exec[key] = true end
  end
  for _, entry in ipairs(p.declared.net) do
    local socket = entry:match("^unix:(.+)$")
    if socket then
      -- A folder that does not exist yet (made when the service starts)
      -- is compared as written.
      local folder = socket:sub(-1) == "/"
      local key = folder and ((core.realpath(socket) or socket):gsub("/$", "") .. "/") or socket_key(socket) or socket
      p.sockets[#p.sockets + 1] = { key = key, folder = folder }
    else
      local host, port = entry:match("^%[(.+)%]:(%d+)$")
      if not host then host, port = entry:match("^([^:]+):(%d+)$") end
      if not host then host = entry:match("^%[(.+)%]$") or entry end
      port = tonumber(port)
      -- The kernel's rule takes a 16-bit port: anything else would name
      -- another port there than the one checked here.
      if port and (port < 1 or port > 65535) then
        error(("mcp.server: permissions.net: %s: a port is 1 to 65535"):format(entry), 0)
      end
      p.net[#p.net + 1] = { host = host:lower(), port = port }
    end
  end
  for _, name in ipairs(p.declared.env) do p.env[name] = true end
  if p.declared.c_modules == true then
    p.c_modules = true
  else
    for _, name in ipairs(p.declared.c_modules) do p.c_modules[name] = true end
  end
  return p
end

--- mcp.server{permissions = ...}: check the table and put it in force.
function M.declare(perms, level, implied_env)
  if locked or M.declared then
    error("mcp.server: permissions are declared once, while the scripts load", level)
  end
  if type(perms) ~= "table" then error("mcp.server: permissions must be a table", level) end
  local known = {}
  for _, k in ipairs(M.KINDS) do known[k] = true end
  for k in pairs(perms) do
    if not known[k] then
      local hint = require("mcp.check").suggest(tostring(k), known)
      error(("mcp.server: permissions: unknown kind %s%s (the kinds: %s)"):format(tostring(k),
        hint and (" (did you mean " .. hint .. "?)") or "", table.concat(M.KINDS, ", ")), level)
    end
  end
  local declared = {}
  for _, kind in ipairs(M.KINDS) do declared[kind] = list_of(kind, perms[kind], level + 1) end
  -- What mcp.server{config} asks the user for, the server may read.
  for _, name in ipairs(implied_env or {}) do declared.env[#declared.env + 1] = name end
  M.declared = declared
  policy = build(declared)
end

--- The scripts have loaded: a server that declared nothing is confined
--- only if the command line gave permissions (--allow-* without
--- --allow-all).
function M.loaded()
  locked = true
  if M.declared then return end
  local cli = overrides()
  if cli.all or next(cli) == nil then return end
  policy = build({})
end

--- What runtime/app/confine.c applies with Landlock, or nil when
--- unconfined: { read = {...}, write = {...}, exec = {...}, ports = {...},
--- roots = bool (the file rules cannot be known in advance), net = bool }.
function M.confinement()
  if not policy then return nil end
  local exec = {}
  for path in pairs(policy.exec) do exec[#exec + 1] = path end
  table.sort(exec)
  -- A host without a port may be reached on any: then the kernel cannot
  -- narrow ports at all.
  local ports, seen = {}, {}
  local any_port = false
  for _, rule in ipairs(policy.net) do
    if not rule.port then
      any_port = true
    elseif not seen[rule.port] then
      seen[rule.port] = true
      ports[#ports + 1] = rule.port
    end
  end
  table.sort(ports)
  return {
    read = policy.read, write = policy.write, exec = exec, ports = ports, any_port = any_port,
    roots = policy.roots_read or policy.roots_write or false,
    script_dir = core.realpath(core.script_dir()) or core.script_dir(),
    summary = M.summary(),
  }
end

--- "read ./data, roots; write $TMP; exec git; net none; env none; c_modules none"
function M.summary()
  if not policy then return nil end
  local parts = {}
  for _, kind in ipairs(M.KINDS) do parts[#parts + 1] = kind .. " " .. allowed_text(kind) end
  return table.concat(parts, "; ")
end

---------------------------------------------------------------------------
-- The doors
---------------------------------------------------------------------------

-- Set when a reload changed the permissions of a process the kernel
-- confined at start (runtime/app/confine.c): the kernel's rules cannot
-- change, so a denial the Lua checks did not make says why.
local kernel_note

--- confine.c, after such a reload: note is what denials add.
function M.kernel_rules_stale(note) kernel_note = note end

-- What a door's raw function returned, with the note added to a denial.
local function kernel_denied(ok, message, code, ...)
  if ok == nil and kernel_note and (code == "EACCES" or code == "EPERM" or code == 13 or code == 1) then
    return nil, ("%s (%s)"):format(tostring(message), kernel_note), code, ...
  end
  return ok, message, code, ...
end

local function write_mode(mode)
  return type(mode) == "string" and mode:find("[wa+]") ~= nil
end

function io.open(path, mode)
  local ok, message, code = check_path(write_mode(mode) and "write" or "read", path)
  if not ok then return nil, message, code end
  return kernel_denied(raw.io_open(path, mode))
end

-- A door that raises on failure, like the function it wraps (a path that
-- is not a string, a file handle say, is the wrapped function's to judge).
local function raising(kind, f)
  return function(path, ...)
    if path ~= nil then
      local ok, message = check_path(kind, path)
      if not ok then error(message, 2) end
    end
    return f(path, ...)
  end
end

io.lines = raising("read", raw.io_lines)
io.input = raising("read", raw.io_input)
io.output = raising("write", raw.io_output)
dofile = raising("read", raw.dofile)

function loadfile(path, ...)
  if path ~= nil then
    local ok, message = check_path("read", path)
    if not ok then return nil, message end
  end
  return raw.loadfile(path, ...)
end

function os.remove(path)
  local ok, message, code = check_path("write", path)
  if not ok then return nil, message, code end
  return raw.os_remove(path)
end

function os.rename(from, to)
  local ok, message, code = check_path("write", from)
  if ok then ok, message, code = check_path("write", to) end
  if not ok then return nil, message, code end
  return raw.os_rename(from, to)
end

function os.tmpname()
  -- On POSIX Lua makes the file (mkstemp in /tmp, whatever TMPDIR says),
  -- so the check comes first; on Windows it only names one.
  local probe = paths.tmpname_probe
  local name = not probe and raw.os_tmpname()
  local ok, message = check_path("write", probe or name)
  if not ok then error(message, 2) end
  return name or raw.os_tmpname()
end

function os.getenv(name)
  local ok, message, code = check_env(name)
  if not ok then return nil, message, code end
  return raw.os_getenv(name)
end

function package.loadlib(path, fn)
  local ok, message, code = check_c_module(path)
  if not ok then return nil, message, code end
  return raw.loadlib(path, fn)
end

-- require's searchers: a Lua module found on package.path is a file read
-- (package.path is the script's to change: "/etc/?" would read any file);
-- a C module the policy does not name is not found, with the reason in
-- require's message. (package.searchers: preload, the script folder, the
-- library, package.path, then the C searchers: package.cpath by the name,
-- then by its root, "a" for "a.b".) A C searcher refuses only a library
-- it would load: a Lua module that was not found is no C module.
do
  local searchers = package.searchers
  local search_path = searchers[4]
  if search_path and #searchers >= 5 then
    searchers[4] = function(name, ...)
      if policy then
        local file = package.searchpath(name, package.path)
        if file then
          local ok, message = check_path("read", file)
          if not ok then return "\n\t" .. message end
        end
      end
      return search_path(name, ...)
    end
  end
  local function c_library(i, name)
    local file = i == 5 and name or (i == 6 and name:match("^([^.]+)%.")) -- Lua's croot looks for "a" only for "a.b"
    return file and package.searchpath(file, package.cpath) ~= nil
  end
  for i = 5, #searchers do -- after preload, the script folder, the library and package.path
    local search = searchers[i]
    if search then
      searchers[i] = function(name, ...)
        if policy and not (policy.c_modules == true or policy.c_modules[name]) and c_library(i, tostring(name)) then
          local _, message = deny("c_modules", name)
          return "\n\t" .. message
        end
        return search(name, ...)
      end
    end
  end
end

-- mcp.exec, mcp.http and the real getenv, guarded in mcp.core's own table
-- (the library reads them from there at each call, and a script that
-- requires mcp.core gets these too).
function core.exec(opts)
  require("mcp.usage").exec(opts)
  if policy and type(opts) == "table" and type(opts.argv) == "table" then
    local program, message, code = check_exec(opts.argv[1])
    if not program then return nil, message, code end
    -- Run the file the check saw; argv (argv[0] included) stays as given.
    local checked = {}
    for k, v in pairs(opts) do checked[k] = v end
    checked.file = program
    return kernel_denied(raw.exec(checked))
  end
  return raw.exec(opts)
end

function core.http_request(request)
  if policy and type(request) == "table" then
    if request.ca_file ~= nil then
      local ok, message, code = check_path("read", request.ca_file)
      if not ok then return nil, message, code end
    end
    local checked = {}
    for k, v in pairs(request) do checked[k] = v end
    -- The C side parses the URL and the proxy (the request's or the
    -- environment's) once, asks check_net about the host and port of that
    -- parse, and hands curl the same parse. Each redirect must be checked
    -- before anything connects to it: mcp.http follows them itself,
    -- through here, and curl follows none.
    checked.permit = check_net
    if request.unix_socket ~= nil then
      -- Everything goes to the socket, whatever host the URL names: the
      -- socket is judged, and the C side judges no host.
      local ok, message, code = check_socket(request.unix_socket)
      if not ok then return nil, message, code end
      checked.permit = nil
    end
    checked.max_redirects = 0
    request = checked
  end
  return raw.http_request(request)
end

core.getenv = os.getenv

-- mcp.fs (the core's table, so a script that kept a function before it
-- declared permissions is held to them too).
do
  local fs = core.fs
  local read, write, list, stat = fs.read, fs.write, fs.list, fs.stat
  local mkdir, remove, rename = fs.mkdir, fs.remove, fs.rename
  -- nil, message, code when path may not be used for kind.
  local function refused(kind, path)
    -- A device (NUL, CON, \\.\...) is not a file, confined or not:
    -- reading CON would wait on the console. Never one on POSIX.
    if paths.is_device(path) then
      return nil, ("%s: a device, not a file"):format(path), "EINVAL"
    end
    local ok, message, code = check_path(kind, path)
    if not ok then return nil, message, code end
  end
  local function guard(kind, f)
    return function(path, ...)
      local _, message, code = refused(kind, path)
      if message then return nil, message, code end
      return kernel_denied(f(path, ...))
    end
  end
  fs.read, fs.list, fs.stat, fs.write = guard("read", read), guard("read", list), guard("read", stat), guard("write", write)
  -- A recursive remove is judged by its folder's path: it never follows a
  -- link out of the tree (lua_fs.c), so all it removes is under it.
  fs.mkdir, fs.remove = guard("write", mkdir), guard("write", remove)
  function fs.rename(from, to)
    for _, path in ipairs { from, to } do
      local _, message, code = refused("write", path)
      if message then return nil, message, code end
    end
    return kernel_denied(rename(from, to))
  end
end

-- mcp.fs misuse (a path that is not a string), raised at the script's line.
do
  local fs = core.fs
  local usage = require "mcp.usage"
  for _, name in ipairs { "read", "write", "list", "stat", "mkdir", "remove", "rename" } do
    local f = fs[name]
    fs[name] = function(path, data, ...)
      usage.fs(name, path, data)
      return f(path, data, ...)
    end
  end
end

return M
