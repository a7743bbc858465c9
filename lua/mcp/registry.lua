-- mcp.registry: what the scripts registered, in registration order.
--
-- Internal to the library: scripts use the functions in `mcp`. Each list
-- keeps its entries in order, finds them by key, and tells the clients when
-- it changes after start-up.

local core = require "mcp.core"
local uri_template = require "mcp.uri_template"

local M = {}

--- The server's description from mcp.server{}.
M.server = {}

--- True once every script has loaded: from then on, changes are announced.
M.started = false

local List = {}
List.__index = List

--- A new ordered list whose changes are announced with `notification`.
---@param notification string
---@param kind string what the messages call an entry ("tool")
local function new_list(notification, kind)
  return setmetatable({ entries = {}, by_key = {}, notification = notification, version = 0, kind = kind }, List)
end

-- The script line that registered something (level: the registering
-- function's caller as seen from here), "notes.lua:12" for a script in the
-- script folder.
local function registered_at(level)
  local info = debug.getinfo(level + 1, "Sl")
  if not info or info.currentline < 0 then return nil end
  local src = info.source:sub(1, 1) == "@" and info.source:sub(2) or info.short_src
  local ok, dir = pcall(core.script_dir)
  if ok and type(dir) == "string" and src:sub(1, #dir + 1) == dir .. "/" then src = src:sub(#dir + 2) end
  return ("%s:%d"):format(src, info.currentline)
end

--- Inside an mcp.everywhere function: every process makes the change
--- itself, and tells its own clients.
M.here_only = false

--- mcp.everywhere's functions, by name.
M.everywhere = {}

function List:changed()
  self.version = self.version + 1
  if M.started then core.broadcast(self.notification, nil, M.here_only) end
end

-- A change a handler makes to this server's own lists (not a mount's) at
-- run time, outside mcp.everywhere, while other processes serve the same
-- server (--workers, --redis): only this process makes it, and the clients
-- the others answer see other lists. Said once per entry.
local warned_one_process = {}
local function one_process_change(list, entry, what)
  local key = (list.kind or "") .. "\0" .. tostring(entry.key)
  if not M.started or M.here_only or entry.owner or warned_one_process[key] or not core.shared() then return end
  warned_one_process[key] = true
  core.stderr("warning", ("%s %s %s at run time%s in this process only: the other processes of this server "
    .. "(--workers, --redis) keep their lists; make the change with mcp.everywhere so every one makes it")
    :format(list.kind or "entry", entry.key, what, what == "registered" and entry.registered_at
      and (" (" .. entry.registered_at .. ")") or ""))
end

function List:add(key, entry)
  local earlier = self.by_key[key]
  if earlier then
    error(("%s %s is already registered%s"):format(self.kind or "", key,
      earlier.registered_at and (" at " .. earlier.registered_at) or ""), 3)
  end
  entry.registered_at = registered_at(3)
  entry.key = key
  entry.enabled = true
  self.entries[#self.entries + 1] = entry
  self.by_key[key] = entry
  one_process_change(self, entry, "registered")
  self:changed()
  return entry
end

function List:remove(entry)
  if self.by_key[entry.key] ~= entry then return false end
  self.by_key[entry.key] = nil
  if entry.on_remove then entry.on_remove() end
  for i, e in ipairs(self.entries) do
    if e == entry then
      table.remove(self.entries, i)
      break
    end
  end
  one_process_change(self, entry, "removed")
  self:changed()
  return true
end

function List:set_enabled(entry, enabled)
  if entry.enabled == enabled or self.by_key[entry.key] ~= entry then return end
  entry.enabled = enabled
  one_process_change(self, entry, enabled and "enabled" or "disabled")
  self:changed()
end

--- The enabled entry for key, or nil.
function List:get(key)
  local e = self.by_key[key]
  if e and e.enabled then return e end
  return nil
end

--- Enabled entries, in order.
function List:enabled_entries()
  local out = {}
  for _, e in ipairs(self.entries) do
    if e.enabled then out[#out + 1] = e end
  end
  return out
end

function List:count()
  local n = 0
  for _, e in ipairs(self.entries) do
    if e.enabled then n = n + 1 end
  end
  return n
end

--- Replace the entries one owner (a mount, lua/mcp/mount.lua) put in the
--- list with these ({key, entry} pairs, in order), leaving everyone
--- else's. A key already taken by another owner is skipped and returned in
--- the second list. Nothing is announced: the owner announces its changes.
function List:sync(owner, pairs_)
  local kept = {}
  for _, e in ipairs(self.entries) do
    if e.owner == owner then
      self.by_key[e.key] = nil
      if e.on_remove then e.on_remove() end
    else
      kept[#kept + 1] = e
    end
  end
  self.entries = kept
  local skipped = {}
  for _, p in ipairs(pairs_) do
    local key, entry = p[1], p[2]
    if self.by_key[key] then
      skipped[#skipped + 1] = key
    else
      entry.key, entry.enabled, entry.owner = key, true, owner
      kept[#kept + 1] = entry
      self.by_key[key] = entry
    end
  end
  self.version = self.version + 1
  return skipped
end

--- The entry this server's own scripts registered (not a mount's: those
--- have an owner, see List:sync) that names uri, enabled or not: the
--- resource of that URI, else the first template matching it; nil when
--- none does. Such a URI is this server's alone: a mounted server's
--- resource or template does not serve it (lua/mcp/dispatch.lua), so what
--- a mount lists cannot be read or followed without the local entry's
--- scopes.
function M.local_claim(uri)
  local resource = M.resources.by_key[uri]
  if resource and not resource.owner then return resource end
  for _, t in ipairs(M.templates.entries) do
    if not t.owner and uri_template.match(t.matcher, uri) then return t end
  end
  return nil
end

--- Called by the MCP methods that read the lists, inside the request's
--- task: fn(listing) brings what it serves up to date (a mount fetches the
--- mounted server's lists after a change), waiting if it must. listing:
--- the list a client asked for, or nil (it asked for one entry).
M.refreshers = {}
function M.refresh(listing)
  for _, fn in ipairs(M.refreshers) do fn(listing) end
end

M.tools = new_list("notifications/tools/list_changed", "tool")
M.resources = new_list("notifications/resources/list_changed", "resource")
M.templates = new_list("notifications/resources/list_changed", "resource template")
M.prompts = new_list("notifications/prompts/list_changed", "prompt")
--- JSON-RPC methods beyond MCP's, registered with mcp.method: name -> handler.
M.methods = {}

return M
