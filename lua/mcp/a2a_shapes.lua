-- A2A's shapes in both versions, one place for what the agent side
-- (lua/mcp/a2a.lua) and the client side (lua/mcp/a2a_client.lua) convert.
-- The model is 1.0's (proto JSON: parts {text}|{data}|{url}|{raw},
-- "TASK_STATE_WORKING", "ROLE_AGENT"); 0.3's (kind, "working", "agent",
-- file parts) are made or read at the edge.

local core = require "mcp.core"

local array = core.array

local M = {}

local STATES = { "SUBMITTED", "WORKING", "COMPLETED", "FAILED", "CANCELED", "INPUT_REQUIRED", "REJECTED",
                 "AUTH_REQUIRED" }
M.TERMINAL = { TASK_STATE_COMPLETED = true, TASK_STATE_FAILED = true, TASK_STATE_CANCELED = true,
               TASK_STATE_REJECTED = true }
M.INTERRUPTED = { TASK_STATE_INPUT_REQUIRED = true, TASK_STATE_AUTH_REQUIRED = true }

--- "input-required", "INPUT_REQUIRED" or "TASK_STATE_INPUT_REQUIRED" -> the last.
function M.state_name(s)
  if type(s) ~= "string" then return nil end
  local up = s:upper():gsub("-", "_"):gsub("^TASK_STATE_", "")
  if up == "CANCELLED" then up = "CANCELED" end
  for _, known in ipairs(STATES) do
    if known == up then return "TASK_STATE_" .. up end
  end
  return nil
end

--- "TASK_STATE_INPUT_REQUIRED" -> "input-required".
function M.state_v03(s) return (s:gsub("^TASK_STATE_", ""):lower():gsub("_", "-")) end

function M.copy(t)
  if type(t) ~= "table" then return t end
  local out = {}
  for k, v in pairs(t) do out[k] = M.copy(v) end
  return setmetatable(out, getmetatable(t))
end

--- A part as it arrived (version v) -> the model's, or nil and why (to
--- follow the part's place, which is put into words only then).
function M.part_in(p, v)
  if type(p) ~= "table" then return nil, " is not an object" end
  if v == "0.3" then
    local out = { metadata = p.metadata, mediaType = nil, filename = nil }
    if p.kind == "text" and type(p.text) == "string" then out.text = p.text
    elseif p.kind == "data" and p.data ~= nil then out.data = p.data
    elseif p.kind == "file" and type(p.file) == "table" then
      local f = p.file
      if type(f.uri) == "string" then out.url = f.uri
      elseif type(f.bytes) == "string" then out.raw = f.bytes
      else return nil, ": a file part needs file.uri or file.bytes" end
      out.mediaType, out.filename = f.mimeType, f.name
    else
      return nil, ": unknown part kind " .. tostring(p.kind)
    end
    return out
  end
  local member, value
  local text, raw, url, data = p.text, p.raw, p.url, p.data
  local count = (text ~= nil and 1 or 0) + (raw ~= nil and 1 or 0) + (url ~= nil and 1 or 0) + (data ~= nil and 1 or 0)
  if count ~= 1 then return nil, ": a part has exactly one of text, raw, url, data" end
  if text ~= nil then member, value = "text", text
  elseif raw ~= nil then member, value = "raw", raw
  elseif url ~= nil then member, value = "url", url
  else member, value = "data", data end
  if member ~= "data" and type(value) ~= "string" then return nil, ": text, url and raw are strings" end
  -- made whole at once: a table grown field by field is rebuilt as it grows;
  -- and without the members most parts lack (a nil one costs a store)
  local metadata, media_type, filename = p.metadata, p.mediaType, p.filename
  if metadata == nil and media_type == nil and filename == nil then return { [member] = value } end
  return { [member] = value, metadata = metadata, mediaType = media_type, filename = filename }
end

--- A part of the model -> as version v sends it.
function M.part_out(p, v)
  if v ~= "0.3" then return p end
  local out = { metadata = p.metadata }
  if p.text ~= nil then out.kind, out.text = "text", p.text
  elseif p.data ~= nil then out.kind, out.data = "data", p.data
  else
    out.kind = "file"
    out.file = { uri = p.url, bytes = p.raw, mimeType = p.mediaType, name = p.filename }
  end
  return out
end

--- A message of the model -> as version v sends it (1.0: the message
--- itself; the encoder only reads it).
function M.message_out(m, v)
  if not m or v ~= "0.3" then return m end
  local out = M.copy(m)
  out.kind = "message"
  out.role = m.role == "ROLE_USER" and "user" or "agent"
  for i, p in ipairs(m.parts) do out.parts[i] = M.part_out(p, v) end
  return out
end

-- ---- What an agent answered, in 0.3, as the model (the client's edge) ----

-- A part the model cannot read stays as it came: the caller sees it.
local function parts_from_v03(list)
  local out = array()
  for i, p in ipairs(type(list) == "table" and list or {}) do out[i] = M.part_in(p, "0.3") or p end
  return out
end

function M.message_from_v03(m)
  if type(m) ~= "table" then return m end
  local out = M.copy(m)
  out.kind = nil
  out.role = m.role == "user" and "ROLE_USER" or m.role == "agent" and "ROLE_AGENT" or m.role
  out.parts = parts_from_v03(m.parts)
  return out
end

local function status_from_v03(s)
  if type(s) ~= "table" then return s end
  return { state = M.state_name(s.state) or s.state, message = M.message_from_v03(s.message), timestamp = s.timestamp }
end

local function artifact_from_v03(a)
  if type(a) ~= "table" then return a end
  local out = M.copy(a)
  out.parts = parts_from_v03(a.parts)
  return out
end

function M.task_from_v03(t)
  if type(t) ~= "table" then return t end
  local out = { id = t.id, contextId = t.contextId, status = status_from_v03(t.status), artifacts = array(),
                history = array(), metadata = t.metadata }
  for i, a in ipairs(t.artifacts or {}) do out.artifacts[i] = artifact_from_v03(a) end
  for i, m in ipairs(t.history or {}) do out.history[i] = M.message_from_v03(m) end
  return out
end

--- A 0.3 result or stream event (its kind says which) -> the model's
--- {task}|{message}|{statusUpdate}|{artifactUpdate}.
function M.event_from_v03(e)
  if type(e) ~= "table" then return e end
  if e.kind == "task" then return { task = M.task_from_v03(e) } end
  if e.kind == "message" then return { message = M.message_from_v03(e) } end
  if e.kind == "status-update" then
    return { statusUpdate = { taskId = e.taskId, contextId = e.contextId, status = status_from_v03(e.status),
                              metadata = e.metadata } }
  end
  if e.kind == "artifact-update" then
    return { artifactUpdate = { taskId = e.taskId, contextId = e.contextId, artifact = artifact_from_v03(e.artifact),
                                append = e.append, lastChunk = e.lastChunk, metadata = e.metadata } }
  end
  return e
end

--- A push notification config of the model ({taskId, id, url, token,
--- authentication = {scheme, credentials}}) -> 0.3's
--- pushNotificationConfig, and back.
function M.push_config_v03(c)
  local auth = c.authentication
  return { id = c.id, url = c.url, token = c.token,
           authentication = auth and { schemes = array { auth.scheme }, credentials = auth.credentials } or nil }
end

function M.push_config_from_v03(r)
  if type(r) ~= "table" then return r end
  local c = r.pushNotificationConfig or {}
  local auth = c.authentication
  return { taskId = r.taskId, id = c.id, url = c.url, token = c.token,
           authentication = type(auth) == "table" and { scheme = auth.scheme or (auth.schemes or {})[1],
                                                        credentials = auth.credentials } or nil }
end

return M
