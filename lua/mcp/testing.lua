-- mcp.testing: test your tools in process, under `luamcp test` (busted).
--
--   local testing = require "mcp.testing"
--
--   describe("my server", function()
--     local t
--     before_each(function() t = testing.server(".") end)
--     after_each(function() t:close() end)
--
--     it("adds", function()
--       local r = t:call("add", { a = 1, b = 2 })
--       assert.equal("3", testing.text(r))
--     end)
--   end)
--
-- testing.server loads the scripts the way `luamcp run` does and speaks to
-- them through the real protocol core, on the real loop: no child process,
-- no pipes. Each call runs as a coroutine as it would in production, so
-- mcp.sleep, mcp.exec, ctx:progress and the rest behave as they do there.
--
-- The methods (call, read, prompt, complete, list, tools, ...) return the
-- result; a JSON-RPC error raises an error object with method, code,
-- message and data (catch it with pcall, or assert.has_error).
-- t:request(method, params) is the raw form: result, or nil and the error.

local client = require "mcp.client"

local M = {}

local Server = setmetatable({}, { __index = client.Client })
Server.__index = Server

local function strict(result, err)
  if result == nil then error(err, 3) end
  return result
end

--- Load the scripts at path (a file or a folder) into an in-process server.
--- options:
---   elicit(params) -> {action = "accept", content = {...}}   answers ctx:elicit
---   sample(params) -> {role, content, model}                 answers ctx:sample
---   roots = {"file:///..."} or function() return {...} end    answers ctx:roots
---   timeout_ms        how long a request may wait for its answer (default 60000)
---   server = { timeout_ms, client_timeout_ms, page_size, memory_limit_mb }   run's options
--- Loading errors (a syntax error, a bad tool definition) raise, with the
--- script's file and line.
function M.server(path, options)
  options = options or {}
  local target = {}
  for k, v in pairs(options) do
    target[k] = v
  end
  target.path = path
  target.client_name = "mcp.testing"
  local c, err = client.connect(target)
  if not c then error(err, 2) end
  return setmetatable(c, Server)
end

function Server:call(name, arguments)
  return strict(client.Client.call(self, name, arguments))
end

function Server:read(uri)
  return strict(client.Client.read(self, uri))
end

function Server:prompt(name, arguments)
  return strict(client.Client.prompt(self, name, arguments))
end

function Server:complete(ref, argument, context)
  return strict(client.Client.complete(self, ref, argument, context))
end

function Server:list(kind)
  return strict(client.Client.list(self, kind))
end

function Server:subscribe(uri)
  return strict(client.Client.subscribe(self, uri))
end

function Server:set_log_level(level)
  return strict(client.Client.set_log_level(self, level))
end

--- The tools (resources, templates, prompts) the server lists, by name
--- (templates by uriTemplate, resources by uri).
local function by(key, list)
  local map = {}
  for _, item in ipairs(list) do
    map[item[key]] = item
  end
  return map
end

function Server:tools() return by("name", self:list("tools")) end
function Server:resources() return by("uri", self:list("resources")) end
function Server:templates() return by("uriTemplate", self:list("resources/templates")) end
function Server:prompts() return by("name", self:list("prompts")) end

--- Reload the scripts in place, as `luamcp dev` does when a file changes:
--- calls in flight finish on the old version; list_changed notifications
--- land in t.notifications. A failed reload raises (the old version keeps
--- serving).
function Server:reload()
  strict(client.Client.reload(self))
  return true
end

--- The notifications received so far with this method (all without one).
function Server:received(method)
  local found = {}
  for _, n in ipairs(self.notifications) do
    if method == nil or n.method == method then found[#found + 1] = n end
  end
  return found
end

--- Forget the notifications received so far.
function Server:clear()
  self.notifications = {}
end

--- The text of a result's text content items (a tool result, a resource's
--- contents, or a prompt's messages), joined with newlines.
function M.text(result)
  local parts = {}
  local function add(item)
    if type(item) ~= "table" then return end
    if type(item.text) == "string" then parts[#parts + 1] = item.text end
    if type(item.content) == "table" then add(item.content) end
    if type(item.resource) == "table" then add(item.resource) end
  end
  for _, item in ipairs(result.content or result.contents or result.messages or {}) do
    add(item)
  end
  return table.concat(parts, "\n")
end

M.json = client.json
M.null = client.null

return M
