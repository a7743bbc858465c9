-- mcp.mount: another MCP server's tools, resources, templates and prompts
-- served as this server's own, each call forwarded through an mcp.client.
--
--   local gh = mcp.client.connect { command = { "github-mcp" } }
--   mcp.mount { prefix = "gh", client = gh }   -- its tool "issues" is served as "gh_issues"
--
-- Names: tools and prompts get "<prefix>_" in front (FastMCP's mount does
-- the same); resource URIs and templates stay as they are (a URI names the
-- resource itself, and the inner server reads it by that URI).
--
-- The lists are fetched when they are first needed, inside the request
-- that needs them (a tools/list, or a call of a name not known yet): no
-- task runs outside a call. When the inner server says a list changed,
-- this server's clients are told at once (their own list_changed) and the
-- list is fetched again when they ask for it. What was fetched is kept in
-- mcp.state: after a reload that reuses the connection, the new generation
-- serves the same lists from its first request.

local core = require "mcp.core"
local registry = require "mcp.registry"
local remote = require "mcp.remote"
local uri_template = require "mcp.uri_template"
local usage = require "mcp.usage"

local M = {}

-- What each inner list is called, and the outer list(s) it fills.
local KINDS = {
  tools = { capability = "tools", notification = "notifications/tools/list_changed" },
  resources = { capability = "resources", notification = "notifications/resources/list_changed" },
  ["resources/templates"] = { capability = "resources", notification = "notifications/resources/list_changed" },
  prompts = { capability = "prompts", notification = "notifications/prompts/list_changed" },
}
local ORDER = { "tools", "resources", "resources/templates", "prompts" }
local KIND_OF_LIST = { [registry.tools] = "tools", [registry.resources] = "resources",
                       [registry.templates] = "resources/templates", [registry.prompts] = "prompts" }
local STALE_BY_NOTIFICATION = {
  ["notifications/tools/list_changed"] = { "tools" },
  ["notifications/resources/list_changed"] = { "resources", "resources/templates" },
  ["notifications/prompts/list_changed"] = { "prompts" },
}

-- The mounts of this generation.
local mounts = {}
-- Counts the inner servers' list changes (see refresh).
local change = 0

local function object_copy(t)
  local out = core.object()
  for k, v in pairs(t) do out[k] = v end
  return out
end

-- A JSON-RPC error of the inner server passes through as it is; any other
-- failure (the connection, a timeout) is an error of this server.
local function forward_failure(message, code, err)
  if type(err) == "table" and math.type(err.code) == "integer" then core.rpc_error(err.code, tostring(err.message), err.data) end
  error(message, 0)
end

-- Registry entries for one inner list.
local builders = {}

function builders.tools(m, list)
  local out = {}
  for _, t in ipairs(list) do
    if type(t) == "table" and type(t.name) == "string" then
      local inner = t.name
      local wire = object_copy(t)
      wire.name = m.name_prefix .. inner
      local entry = {
        name = wire.name, wire = core.raw(core.json_encode(wire)), task = {},
        handler = function(args)
          local result, message, code, err = m.client:call(inner, args)
          if result == nil then
            if err then forward_failure(message, code, err) end
            return nil, message
          end
          return result
        end,
      }
      out[#out + 1] = { wire.name, entry }
    end
  end
  return registry.tools, out
end

function builders.resources(m, list)
  local out = {}
  for _, r in ipairs(list) do
    if type(r) == "table" and type(r.uri) == "string" then
      local entry = {
        uri = r.uri, mimeType = r.mimeType, wire = core.raw(core.json_encode(object_copy(r))),
        read = function(uri)
          local result, message, code, err = m.client:read(uri)
          if result == nil then forward_failure(message, code, err) end
          return result
        end,
      }
      out[#out + 1] = { r.uri, entry }
    end
  end
  return registry.resources, out
end

builders["resources/templates"] = function(m, list)
  local out = {}
  for _, t in ipairs(list) do
    local matcher = type(t) == "table" and type(t.uriTemplate) == "string" and uri_template.compile(t.uriTemplate)
    if matcher then
      local entry = {
        uriTemplate = t.uriTemplate, mimeType = t.mimeType, matcher = matcher,
        wire = core.raw(core.json_encode(object_copy(t))),
        read = function(_, _, uri)
          local result, message, code, err = m.client:read(uri)
          if result == nil then forward_failure(message, code, err) end
          return result
        end,
      }
      out[#out + 1] = { t.uriTemplate, entry }
    end
  end
  return registry.templates, out
end

function builders.prompts(m, list)
  local out = {}
  for _, p in ipairs(list) do
    if type(p) == "table" and type(p.name) == "string" then
      local inner = p.name
      local wire = object_copy(p)
      wire.name = m.name_prefix .. inner
      local arguments = {}
      for i, a in ipairs(type(p.arguments) == "table" and p.arguments or {}) do
        if type(a) == "table" and type(a.name) == "string" then arguments[i] = { name = a.name, required = a.required } end
      end
      local entry = {
        name = wire.name, description = p.description, arguments = arguments,
        wire = core.raw(core.json_encode(wire)),
        get = function(args)
          local result, message, code, err = m.client:prompt(inner, args)
          if result == nil then forward_failure(message, code, err) end
          return result
        end,
      }
      out[#out + 1] = { wire.name, entry }
    end
  end
  return registry.prompts, out
end

-- Put one fetched list (the inner server's entries) in the registry.
local function apply(m, kind, list)
  local target, entries = builders[kind](m, list)
  local function warn(key, why)
    if m.warned[key] then return end
    m.warned[key] = true
    core.stderr("warning", ("mcp.mount %s: %s %s %s; the mounted one is not"):format(m.prefix, target.kind, key, why))
  end
  -- A URI under a template of this server's own is that template's (its
  -- scopes guard it): the mounted resource would never be served.
  local served = {}
  for _, p in ipairs(entries) do
    local claim = target == registry.resources and registry.local_claim(p[1])
    if claim and claim.uriTemplate then
      warn(p[1], ("is under the template %s%s served here"):format(claim.uriTemplate,
        claim.registered_at and (" (" .. claim.registered_at .. ")") or ""))
    else
      served[#served + 1] = p
    end
  end
  for _, key in ipairs(target:sync(m, served)) do warn(key, "is already served here") end
end

-- Does the inner server serve this list (its capabilities)?
local function offers(m, kind)
  local info = m.client:server()
  local caps = info and type(info.server) == "table" and info.server.capabilities
  if type(caps) ~= "table" then return true end
  local cap = caps[KINDS[kind].capability]
  return cap ~= nil and cap ~= core.null and cap ~= false
end

-- Fetch the stale lists, inside the request that needs them. Two requests
-- may fetch at once: each applies what it got unless a newer change came
-- in meanwhile, so the last word is the inner server's newest list.
local function refresh(m)
  local listening, why = m.client:_listen() -- shakes hands first, if need be (stdio only)
  if not listening then core.stderr("warning", ("mcp.mount %s: %s"):format(m.prefix, tostring(why))) end
  for _, kind in ipairs(ORDER) do
    local since = m.stale[kind]
    if since then
      local list, message
      if not listening then message = why end
      if not message and offers(m, kind) then
        list, message = m.client:list(kind)
      elseif not message then
        list = {}
      end
      if m.stale[kind] == since then
        if list then
          m.cache[kind] = core.json_encode(core.array(list))
          apply(m, kind, list)
          m.stale[kind] = false
        else
          -- Not retried at every request: the next change (or reload) fetches it again.
          core.stderr("warning", ("mcp.mount %s: %s/list failed: %s"):format(m.prefix, kind, tostring(message)))
          m.stale[kind] = false
        end
      end
    end
  end
end

-- Every stale mount of this generation, before a list is read.
registry.refreshers[#registry.refreshers + 1] = function(listing)
  if not core.current_ctx() then return end -- only a request can wait for the inner server
  for _, m in ipairs(mounts) do
    -- Over HTTP no stream brings the inner server's list changes (the
    -- runtime opens none outside requests): its lists are fetched again
    -- whenever a client here asks for one.
    local kind = listing and m.client.opts.url and KIND_OF_LIST[listing]
    if kind then
      change = change + 1
      m.stale[kind] = change
    end
    -- The lists kept from the last generation stand only if the
    -- connection they came from is still the one in use.
    if not m.checked then
      m.checked = true
      local ok = m.client:_ready()
      if not ok or not m.client.reused then
        for _, kind in ipairs(ORDER) do
          change = change + 1
          m.stale[kind] = change
        end
      end
      m.session = m.client.session
    elseif m.client.session ~= m.session then
      -- The connection ended and was opened again: another session, maybe
      -- another server behind it.
      m.session = m.client.session
      for _, kind in ipairs(ORDER) do
        change = change + 1
        m.stale[kind] = change
      end
    end
    for _, kind in ipairs(ORDER) do
      if m.stale[kind] then
        refresh(m)
        break
      end
    end
  end
end


-- The inner server changed a list: this server's clients hear of it now,
-- and the list is fetched again when it is next read.
local function on_notification(m, msg)
  local kinds = STALE_BY_NOTIFICATION[msg.method]
  if not kinds then return end
  change = change + 1
  for _, kind in ipairs(kinds) do m.stale[kind] = change end
  if registry.started then core.broadcast(msg.method) end
end

local OPTIONS = { prefix = true, client = true }

--- Serve another server's tools, resources, templates and prompts as this
--- server's own: mcp.mount{prefix = "gh", client = mcp.client.connect{...}}.
function M.mount(opts)
  if type(opts) ~= "table" then usage.raise("mcp.mount needs {prefix = \"name\", client = mcp.client.connect{...}}") end
  for k in pairs(opts) do
    if not OPTIONS[k] then usage.raise(("mcp.mount: unknown option %s (the options: prefix, client)"):format(tostring(k))) end
  end
  if getmetatable(opts.client) ~= remote.Client then usage.raise("mcp.mount: client must be an mcp.client.connect{...}") end
  local prefix = opts.prefix
  if prefix ~= nil and (type(prefix) ~= "string" or not prefix:match("^[%w%-%.]*$")) then
    usage.raise("mcp.mount: prefix must be letters, digits, - and . (\"\" or nil: the names as they are)")
  end
  local c = opts.client
  for _, other in ipairs(mounts) do
    if other.client == c then usage.raise("mcp.mount: this client is already mounted") end
  end
  local m = {
    prefix = prefix or "", name_prefix = (prefix and prefix ~= "") and (prefix .. "_") or "", client = c,
    stale = {}, warned = {},
    cache = core.state("luamcp.mount " .. c.key .. " " .. (prefix or ""), {}),
  }
  for _, kind in ipairs(ORDER) do
    local kept = m.cache[kind]
    local ok, list = false, nil
    if kept then ok, list = pcall(core.json_decode, kept) end
    if ok and type(list) == "table" then
      apply(m, kind, list)
      m.stale[kind] = false
    else
      change = change + 1
      m.stale[kind] = change
    end
  end
  c:on_notification(function(msg) on_notification(m, msg) end)
  registry.mounted = true
  mounts[#mounts + 1] = m
end

return M
