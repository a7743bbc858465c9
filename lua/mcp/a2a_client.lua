-- mcp.a2a: calling A2A agents from a script (docs/lua-api.md, "Agents
-- (A2A)"). JSON-RPC 1.0 over mcp.http, so the script's net permission
-- judges the agent's URL as it judges any request (mcp.client's rule).

local core = require "mcp.core"
local http = require "mcp.http"

local M = {}
local cards = {} -- base URL -> card: read once per generation

local Agent = {}
Agent.__index = Agent

local function fail(what, err) error(("mcp.a2a: %s: %s"):format(what, tostring(err)), 3) end

--- mcp.a2a.connect(url [, {headers}]) -> agent (its card read and cached).
function M.connect(url, opts)
  if type(url) ~= "string" or not url:match("^https?://") then error("mcp.a2a.connect(url): an http(s) URL", 2) end
  opts = opts or {}
  local base = url:gsub("/$", "")
  local card = cards[base]
  if not card then
    local r, err = http.get(base .. "/.well-known/agent-card.json", { headers = opts.headers })
    if not r then fail("reading the card", err) end
    if r.status ~= 200 then fail("reading the card", "HTTP " .. r.status) end
    card = core.json_decode(r.body)
    if type(card) ~= "table" then fail("reading the card", "not JSON") end
    cards[base] = card
  end
  local endpoint
  for _, i in ipairs(card.supportedInterfaces or {}) do
    if i.protocolBinding == "JSONRPC" and i.protocolVersion == "1.0" then endpoint = i.url end
  end
  return setmetatable({ card = card, url = endpoint or card.url or base, headers = opts.headers or {}, next_id = 0 }, Agent)
end

local function headers(self)
  local h = { ["a2a-version"] = "1.0", accept = "application/json, text/event-stream" }
  for k, v in pairs(self.headers) do h[k] = v end
  return h
end

function Agent:call(method, params)
  self.next_id = self.next_id + 1
  local r, err = http.request { method = "POST", url = self.url, headers = headers(self),
                                json = { jsonrpc = "2.0", id = self.next_id, method = method, params = params } }
  if not r then fail(method, err) end
  local body = core.json_decode(r.body)
  if type(body) ~= "table" then fail(method, "HTTP " .. r.status .. ", not JSON") end
  if body.error then core.rpc_error(body.error.code, body.error.message, body.error.data) end
  return body.result
end

local function message(m)
  if type(m) == "string" then m = { text = m } end
  local out = { messageId = core.random_hex(16), role = "ROLE_USER", taskId = m.taskId, contextId = m.contextId,
                metadata = m.metadata, parts = m.parts or core.array { m.data ~= nil and { data = m.data } or { text = m.text } } }
  return out
end

--- agent:send(text | {text|data|parts, taskId, contextId}, {wait = false}) -> {message} | {task}
function Agent:send(m, opts)
  opts = opts or {}
  return self:call("SendMessage", { message = message(m), configuration = { returnImmediately = opts.wait == false } })
end

function Agent:get(id) return self:call("GetTask", { id = id }) end
function Agent:cancel(id) return self:call("CancelTask", { id = id }) end

--- agent:stream(message, fn): fn(event) for each StreamResponse; returns the last.
function Agent:stream(m, fn)
  self.next_id = self.next_id + 1
  local pending, last = "", nil
  local r, err = http.request { method = "POST", url = self.url, headers = headers(self),
    json = { jsonrpc = "2.0", id = self.next_id, method = "SendStreamingMessage", params = { message = message(m) } },
    timeout_ms = 600000,
    stream = function(chunk)
      pending = pending .. chunk
      while true do
        local event, rest = pending:match("^(.-)\r?\n\r?\n(.*)$")
        if not event then break end
        pending = rest
        local data = event:match("data: ?(.*)")
        local body = data and core.json_decode(data)
        if type(body) == "table" and body.result then
          last = body.result
          if fn then fn(body.result) end
        elseif type(body) == "table" and body.error then
          core.rpc_error(body.error.code, body.error.message, body.error.data)
        end
      end
    end }
  if not r then fail("SendStreamingMessage", err) end
  if r.status ~= 200 then fail("SendStreamingMessage", "HTTP " .. r.status) end
  return last
end

return M
