-- mcp.http: HTTP/1.1 and HTTP/2 requests, over TLS, without blocking the
-- loop (libcurl driven by libuv, in lua_http.c). A handler waits for its
-- response while every other call goes on.
--
--   local r, err, code = mcp.http.request { method = "POST", url = "https://api.example.com/v1/x",
--     headers = { authorization = "Bearer " .. key }, json = { q = args.q },
--     timeout_ms = 10000, max_bytes = 8 << 20, stream = function(chunk) ... end }
--   -- r.status, r.headers (lower-case names), r.body, r.url (after redirects), r:json()
--
-- Expected failures return nil, message, code (dns, connect, tls, timeout,
-- too_large, redirects, protocol); misuse (a bad option) raises.

local core = require "mcp.core"
local permissions = require "mcp.permissions"
local usage = require "mcp.usage"

local M = {}

local Response = {}
Response.__index = Response

--- The body decoded as JSON (raises when it is not JSON).
function Response:json()
  local ok, value = pcall(core.json_decode, self.body)
  if not ok then error("mcp.http: the response body is not JSON: " .. tostring(value), 2) end
  return value
end

local OPTIONS = {
  url = true, method = true, headers = true, body = true, json = true, timeout_ms = true, max_bytes = true,
  max_redirects = true, ca_file = true, insecure = true, proxy = true, stream = true, unix_socket = true,
}

--- Send a request and wait for its response.
function M.request(opts)
  usage.http(opts, OPTIONS)
  local request = {}
  for k, v in pairs(opts) do request[k] = v end
  if opts.json ~= nil then
    if opts.body ~= nil then usage.raise("mcp.http: give body or json, not both") end
    request.json = nil
    request.body = core.json_encode(opts.json)
    local headers = {}
    local typed = false
    for k, v in pairs(opts.headers or {}) do
      headers[k] = v
      if type(k) == "string" and k:lower() == "content-type" then typed = true end
    end
    if not typed then headers["content-type"] = "application/json" end
    request.headers = headers
  end
  if request.method == nil then request.method = request.body ~= nil and "POST" or "GET" end
  if permissions.confined() then return M._follow(request) end
  -- Misuse found in C (and an error from the stream function) is raised
  -- again here, at the line that called mcp.http.
  local ok, r, err, code = pcall(core.http_request, request)
  if not ok then usage.reraise(r) end
  if not r then return nil, err, code end
  return setmetatable(r, Response)
end

local REDIRECTS = { [301] = true, [302] = true, [303] = true, [307] = true, [308] = true }

-- Location against the URL it answered.
local function join(base, location)
  if location:match("^%a[%w+.-]*://") then return location end
  local scheme, authority, path = base:match("^(%a[%w+.-]*:)//([^/?#]*)([^?#]*)")
  if location:sub(1, 2) == "//" then return scheme .. location end
  if location:sub(1, 1) == "/" then return scheme .. "//" .. authority .. location end
  return scheme .. "//" .. authority .. (path:match("^(.*/)") or "/") .. location
end

-- Headers that belong to one origin, dropped when a redirect leaves it (as
-- curl does since 7.83: another scheme, host or port).
local CREDENTIALS = { authorization = true, cookie = true, ["proxy-authorization"] = true }

local function origin(url)
  local scheme, host, port = permissions.url_parts(url)
  return ("%s://%s:%s"):format(scheme, host, port)
end

-- A confined server follows redirects itself: core.http_request checks
-- each hop's host and port before anything connects to it (curl would
-- follow them inside one transfer).
function M._follow(request)
  local max = request.max_redirects or 5
  request.max_redirects = 0
  local hops = 0
  while true do
    local ok, r, err, failure = pcall(core.http_request, request)
    if not ok then usage.reraise(r) end
    if not r then return nil, err, failure end
    local location = r.headers.location
    if not (REDIRECTS[r.status] and location) then return setmetatable(r, Response) end
    if hops >= max then
      return nil, ("mcp.http: %s: more than %d redirects"):format(request.url, max), "redirects"
    end
    hops = hops + 1
    local from = origin(request.url)
    request.url = join(request.url, location)
    if origin(request.url) ~= from then
      local kept = {}
      for k, v in pairs(request.headers or {}) do
        if not CREDENTIALS[tostring(k):lower()] then kept[k] = v end
      end
      request.headers = kept
    end
    -- As browsers and curl do: 303, and 301/302 after a POST, become a GET.
    if r.status == 303 or ((r.status == 301 or r.status == 302) and request.method == "POST") then
      request.method, request.body = "GET", nil
    end
  end
end

--- GET url (options as for request).
function M.get(url, opts)
  if opts ~= nil and type(opts) ~= "table" then usage.raise("mcp.http.get(url, options?): options must be a table") end
  local request = { url = url, method = "GET" }
  for k, v in pairs(opts or {}) do request[k] = v end
  return M.request(request)
end

--- POST url with a body (a string) or json (a value to encode).
function M.post(url, opts)
  if opts ~= nil and type(opts) ~= "table" then usage.raise("mcp.http.post(url, options?): options must be a table") end
  local request = { url = url, method = "POST" }
  for k, v in pairs(opts or {}) do request[k] = v end
  return M.request(request)
end

return M
