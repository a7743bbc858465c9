-- mcp.token_store: what `luamcp login` keeps, in one file of the user's
-- config folder that only the user reads: $XDG_CONFIG_HOME/luamcp/
-- tokens.json (~/.config/luamcp; on Windows %APPDATA%\luamcp), mode 0600,
-- sealed with the OS's data protection API on Windows (write_private).
--
--   servers[canonical server URL] = {issuer, resource, scope, access_token,
--     token_type, refresh_token, expires_at, client = {client_id,
--     client_secret}, dpop_key}: the token for that MCP server
--   clients[issuer] = {client_id, client_secret, method}: luamcp's
--     dynamic registration at that authorization server (never sent to
--     another)
--
-- Read whole and written whole: a login is rare. Nothing here is ever
-- printed; status() lists what is kept without the secrets.

-- The command line's luamcp.client, or in a server (mcp.client using a
-- kept login) luamcp.remote's files and mcp.core's JSON.
local has_client, core = pcall(require, "luamcp.client")
if not has_client then
  local remote, mcore = require "luamcp.remote", require "mcp.core"
  core = { read_private = remote.read_private, write_private = remote.write_private,
    json_decode = function(text)
      local ok, v = pcall(mcore.json_decode, text)
      return ok and v or nil
    end, json_encode = mcore.json_encode, object = mcore.object,
    exists = function() return "directory" end, mkdir = function() return true end }
end

local M = {}

-- scheme, authority (host[:port]) and path of an http(s) URL; no query or
-- fragment in the path.
function M.split_url(url)
  local scheme, authority, rest = tostring(url):match("^(%a[%w+.-]*)://([^/?#]+)(.*)$")
  if not scheme then return nil end
  local path = rest:match("^[^?#]*") or ""
  return scheme:lower(), authority:lower(), path
end

--- The canonical URI of an MCP server (RFC 8707, MCP 2025-11-25
--- "Canonical Server URI"): scheme and host lower case, no fragment, no
--- query, no trailing slash (unless the path is just "/"). What a login
--- is kept under.
function M.canonical_url(url)
  local scheme, authority, path = M.split_url(url)
  if not scheme then return url end
  if path ~= "/" then path = path:gsub("/+$", "") end
  return scheme .. "://" .. authority .. path
end

--- The folder, or nil and why.
function M.dir()
  local base = os.getenv("XDG_CONFIG_HOME")
  if base and not base:match("^/") then base = nil end -- the XDG rule: absolute or ignored
  if package.config:sub(1, 1) == "\\" then
    base = os.getenv("APPDATA")
    if not base or base == "" then return nil, "%APPDATA% is not set: nowhere to keep the login" end
  elseif not base or base == "" then
    local home = os.getenv("HOME")
    if not home or home == "" then return nil, "$HOME is not set: nowhere to keep the login" end
    base = home .. "/.config"
  end
  return base .. "/luamcp"
end

local function path()
  local dir, why = M.dir()
  if not dir then return nil, why end
  return dir .. "/tokens.json"
end
M.path = path

--- The kept document ({servers = {}, clients = {}}), or nil and why.
function M.load()
  local file, why = path()
  if not file then return nil, why end
  local text, err = core.read_private(file)
  if text == nil and err then return nil, err end
  local doc = text and core.json_decode(text) or nil
  if text and type(doc) ~= "table" then return nil, file .. " is not a luamcp token file: remove it to log in again" end
  doc = doc or {}
  doc.servers = type(doc.servers) == "table" and doc.servers or {}
  doc.clients = type(doc.clients) == "table" and doc.clients or {}
  return doc
end

--- Write the document back: true, or nil and why.
function M.save(doc)
  local dir, why = M.dir()
  if not dir then return nil, why end
  local parent = dir:match("^(.*)[/\\][^/\\]+$")
  if parent and not core.exists(parent) then core.mkdir(parent) end
  if not core.exists(dir) then
    local ok, err = core.mkdir(dir)
    if not ok then return nil, ("cannot make %s: %s"):format(dir, tostring(err)) end
  end
  -- Empty tables as objects, not arrays.
  local out = { servers = core.object(), clients = core.object() }
  for k, v in pairs(doc.servers) do out.servers[k] = v end
  for k, v in pairs(doc.clients) do out.clients[k] = v end
  return core.write_private(dir .. "/tokens.json", core.json_encode(out))
end

--- The key a server's token is kept under.
function M.key(url) return M.canonical_url(url) end

--- What is kept, for people: one line per server, no secret in it.
function M.status(doc, now)
  local lines = {}
  local keys = {}
  for k in pairs(doc.servers) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do
    local e = doc.servers[k]
    local expiry
    if type(e.expires_at) == "number" then
      local left = e.expires_at - now
      expiry = left > 0 and ("expires in %d s"):format(left) or "expired"
    else
      expiry = "no expiry given"
    end
    lines[#lines + 1] = ("%s  authorization server %s; %s token%s; %s%s"):format(k, tostring(e.issuer),
      tostring(e.token_type or "Bearer"), e.scope and (" for scope '" .. e.scope .. "'") or "", expiry,
      e.refresh_token and ", refreshable" or "")
  end
  return lines
end

return M
