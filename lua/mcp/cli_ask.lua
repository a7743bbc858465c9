-- mcp.cli_ask: how `luamcp call`, `read` and `prompt` answer a server's
-- question (elicitation/create): from --answer key=value, typed by the
-- requested schema as call's arguments are; else on the terminal, when
-- stdin is one; else refused with a message that says how to answer.

local core = require "luamcp.client"

local M = {}

-- What the server asks is shown with its control bytes written out
-- (core.visible), never obeyed by the terminal.
local function say(text) io.stderr:write(core.visible(text), "\n") end

-- The properties' names: the required ones first, each group sorted.
local function sorted_keys(t, required)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  required = required or {}
  table.sort(keys, function(a, b)
    if (required[a] or false) ~= (required[b] or false) then return required[a] or false end
    return a < b
  end)
  return keys
end

-- text typed by the property's schema (with its enum): the value, or nil
-- and why not.
local function typed_value(name, text, property)
  local ok, value = pcall(require("mcp.cli").typed, name, text, property)
  if not ok then return nil, type(value) == "table" and value.message or tostring(value) end
  local enum = type(property) == "table" and (property.enum or property.oneOf) or nil
  if type(enum) == "table" and property.enum then
    for _, allowed in ipairs(enum) do
      if allowed == value then return value end
    end
    local shown = {}
    for i, allowed in ipairs(enum) do shown[i] = tostring(allowed) end
    return nil, ("%s=%s: one of %s"):format(name, text, table.concat(shown, ", "))
  end
  return value
end

-- "name (integer, required; one of a, b) [default]"
local function describe(name, property, required)
  local parts = {}
  if type(property.type) == "string" then parts[#parts + 1] = property.type end
  if required then parts[#parts + 1] = "required" end
  if type(property.enum) == "table" then
    local shown = {}
    for i, v in ipairs(property.enum) do shown[i] = tostring(v) end
    parts[#parts + 1] = "one of " .. table.concat(shown, ", ")
  end
  local text = property.title or name
  if text ~= name then text = text .. " [" .. name .. "]" end
  if #parts > 0 then text = text .. " (" .. table.concat(parts, "; ") .. ")" end
  if property.description then text = text .. " - " .. property.description end
  if property.default ~= nil then text = text .. " {default " .. tostring(property.default) .. "}" end
  return text
end

-- Ask on the terminal until the answer fits; nil: left empty.
local function ask(name, property, required)
  while true do
    io.stderr:write("  ", core.visible(describe(name, property, required)), ": ")
    io.stderr:flush()
    local line = io.stdin:read("l")
    if line == nil then return nil, "end of input" end
    if line == "" then
      if property.default ~= nil then return property.default end
      if not required then return nil end
      say("  (an answer is required)")
    else
      local value, why = typed_value(name, line, property)
      if value ~= nil then return value end
      say("  " .. why)
    end
  end
end

--- The elicit handler of a client command. answers: the --answer words;
--- accept_defaults (--accept-defaults): with no terminal, accept with the
--- answers given and the schema's defaults for the rest.
function M.elicitation(command, answers, fail, accept_defaults)
  local given, any = {}, false
  for _, word in ipairs(answers or {}) do
    local key, text = word:match("^([^=]+)=(.*)$")
    if not key then fail(("luamcp %s: --answer %s: answers are key=value"):format(command, word), 2) end
    given[key] = text
    any = true
  end
  local prefix = "luamcp " .. command .. ": "
  local asked = false
  local function refuse(message, why)
    if not asked then say(prefix .. "the server asks: " .. tostring(message)) end
    say(prefix .. why .. "; the question is cancelled")
    return { action = "cancel" }
  end
  return function(params)
    local terminal = core.is_terminal(0)
    local message = params.message or "(no message)"
    if params.mode == "url" then
      if not terminal then return refuse(message, "it asks to open " .. tostring(params.url) .. ", and there is no terminal to confirm on") end
      say(prefix .. "the server asks: " .. message)
      io.stderr:write("  open ", core.visible(tostring(params.url)), " - done? [y/N] ")
      local line = io.stdin:read("l") or ""
      return { action = line:match("^%s*[yY]") and "accept" or "decline" }
    end
    local schema = type(params.requestedSchema) == "table" and params.requestedSchema or {}
    local properties = type(schema.properties) == "table" and schema.properties or {}
    local required = {}
    for _, name in ipairs(type(schema.required) == "table" and schema.required or {}) do required[name] = true end
    if not terminal and not any and not accept_defaults then
      local names = sorted_keys(properties, required)
      local hint = #names > 0 and (" (--answer " .. names[1] .. "=VALUE" .. (#names > 1 and " ..." or "") .. ")") or ""
      return refuse(message, "there is no terminal to ask on and no --answer was given" .. hint)
    end
    local content = {}
    local missing = {}
    asked = false
    for _, name in ipairs(sorted_keys(properties, required)) do
      local property = type(properties[name]) == "table" and properties[name] or {}
      if given[name] ~= nil then
        local value, why = typed_value(name, given[name], property)
        if value == nil then return refuse(message, "--answer " .. why) end
        content[name] = value
      elseif terminal then
        if not asked then say(prefix .. "the server asks: " .. message) end
        asked = true
        local value, why = ask(name, property, required[name])
        if why then return refuse(message, "the terminal closed (" .. why .. ")") end
        content[name] = value
      elseif required[name] then
        missing[#missing + 1] = name
      elseif property.default ~= nil then
        content[name] = property.default
      end
    end
    if #missing > 0 then
      return refuse(message, "no --answer for " .. table.concat(missing, ", ") .. ", and there is no terminal to ask on")
    end
    return { action = "accept", content = core.object(content) }
  end
end

return M
