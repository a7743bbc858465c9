-- Servers a spec starts and stops itself, from Debian's packages: a
-- redis-server and an nginx, each on 127.0.0.1 ports chosen at run time,
-- with their files in a temporary directory. Each `start` returns nil and a
-- reason when the program is not installed, so that the spec can skip.
local mcp_client = require "mcp_client"
local uv = require "luv"

local M = {}

--- A TCP port on 127.0.0.1 that was free a moment ago (the kernel's pick).
function M.free_port()
  local tcp = uv.new_tcp()
  assert(tcp:bind("127.0.0.1", 0))
  local port = tcp:getsockname().port
  tcp:close()
  uv.run("nowait")
  return port
end

--- The path of a program, looked up in PATH and the sbin folders (nginx is
--- in /usr/sbin, which a user's PATH may lack); nil if absent.
function M.which(name)
  local path = (os.getenv("PATH") or "") .. ":/usr/sbin:/sbin"
  for dir in path:gmatch("[^:]+") do
    local full = dir .. "/" .. name
    if uv.fs_access(full, "X") then return full end
  end
end

-- Can something be connected to on 127.0.0.1:port?
local function accepts(port)
  local tcp, connected, failed = uv.new_tcp(), false, false
  tcp:connect("127.0.0.1", port, function(err)
    if err then failed = true else connected = true end
  end)
  mcp_client.wait_until(function() return connected or failed end, 1000)
  tcp:close()
  uv.run("nowait")
  return connected
end

local Service = {}
Service.__index = Service

local function spawn(bin, args, port, name)
  local proc = mcp_client.spawn(args, { bin = bin })
  local self = setmetatable({ proc = proc, port = port, name = name }, Service)
  local up = mcp_client.wait_until(function() return proc.exited or accepts(port) end, 60000)
  assert(up and not proc.exited, name .. " did not start:\n" .. proc.stderr .. table.concat(proc.lines, "\n"))
  return self
end

--- SIGTERM, and wait for the exit (SIGKILL after 30 s).
function Service:stop()
  self.proc:terminate(30000)
end

--- redis-server on port (a free one by default): no persistence, no config
--- file. opts: password (requirepass). Returns the service, or nil and why
--- not.
function M.redis(port, opts)
  local bin = M.which("redis-server")
  if not bin then return nil, "redis-server is not installed (Debian package redis-server)" end
  port = port or M.free_port()
  local args = { "--port", tostring(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
    "--protected-mode", "no" }
  if opts and opts.password then
    args[#args + 1] = "--requirepass"
    args[#args + 1] = opts.password
  end
  local self = spawn(bin, args, port, "redis-server")
  self.url = "redis://127.0.0.1:" .. port
  return self
end

--- nginx in the foreground with http_conf (what goes inside `http { }`)
--- listening where that text says; dir holds its files. Returns the
--- service, or nil and why not.
function M.nginx(http_conf, port, dir)
  local bin = M.which("nginx")
  if not bin then return nil, "nginx is not installed (Debian package nginx-light)" end
  local conf = dir .. "/nginx.conf"
  mcp_client.write_file(conf, table.concat({
    "daemon off;",
    "master_process off;",
    "worker_processes 1;",
    "error_log " .. dir .. "/error.log warn;",
    "pid " .. dir .. "/nginx.pid;",
    "events { worker_connections 1024; }",
    "http {",
    "  access_log off;",
    "  client_body_temp_path " .. dir .. "/body;",
    "  proxy_temp_path " .. dir .. "/proxy;",
    "  fastcgi_temp_path " .. dir .. "/fastcgi;",
    "  uwsgi_temp_path " .. dir .. "/uwsgi;",
    "  scgi_temp_path " .. dir .. "/scgi;",
    http_conf,
    "}",
  }, "\n"))
  local self = spawn(bin, { "-p", dir, "-c", conf, "-e", dir .. "/error.log" }, port, "nginx")
  self.url = "http://127.0.0.1:" .. port .. "/mcp"
  self.error_log = dir .. "/error.log"
  return self
end

return M
