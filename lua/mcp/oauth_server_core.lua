-- mcp.oauth_server_core: what mcp.client_auth needs from C on the command
-- line (luamcp.client's oauth_fetch and friends), given in a server over
-- mcp.http, so that a tool's mcp.client.connect{url, oauth = {...}} gets
-- a token by client credentials with the same discovery and rules as
-- luamcp call. The fetches run inside the task (mcp.http yields), and go
-- only where the script's net permissions allow.

local mcore = require "mcp.core"

local M = {}

--- One exchange, no redirects followed: {status, headers, body} | nil, why.
function M.oauth_fetch(req)
  local r, err = require("mcp.http").request { method = req.method, url = req.url, headers = req.headers,
    body = req.body, timeout_ms = req.timeout_ms or 30000, max_redirects = 0 }
  if not r then return nil, ("cannot reach %s: %s"):format(req.url, tostring(err)) end
  return { status = r.status, headers = r.headers or {}, body = r.body or "" }
end

function M.json_decode(text)
  local ok, value = pcall(mcore.json_decode, text)
  return ok and value or nil
end

M.json_encode = mcore.json_encode
M.base64_encode = mcore.base64_encode

--- https, or plain http to a loopback host (OAuth 2.1 1.5).
function M.credentials_allowed(url)
  local scheme, host = tostring(url):match("^(%a[%w+.-]*)://([^/?#]*)")
  if not scheme then return false, "it is not a URL" end
  if host:find("@", 1, true) then return false, "it has a user name or password before the host" end
  scheme = scheme:lower()
  if scheme == "https" then return true end
  local name = host:lower():gsub(":%d+$", "")
  if scheme == "http" and (name == "127.0.0.1" or name == "localhost" or name == "[::1]") then return true end
  return false, ("it is plain http to %s, which is not a loopback host (OAuth 2.1 wants https)"):format(name)
end

function M.jws_sign() return nil, "private_key_jwt is for luamcp call; mcp.client takes a client secret" end

return M
