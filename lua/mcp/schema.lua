-- mcp.schema: JSON Schemas written as Lua tables.
--
-- A Lua table cannot tell an empty array from an empty object, so a schema
-- table is encoded knowing which keywords hold arrays (`required = {}` must
-- leave as []) and which hold maps of subschemas (`properties = {}` as {}).
-- A schema given as a JSON string is kept byte for byte.

local core = require "mcp.core"

local M = {}

-- Keywords whose value is an array.
local ARRAY_KEYWORDS = {
  required = true, enum = true, allOf = true, anyOf = true, oneOf = true,
  prefixItems = true, examples = true,
}
-- Keywords whose value is an object mapping names to subschemas or arrays.
local MAP_KEYWORDS = {
  properties = true, patternProperties = true, ["$defs"] = true, definitions = true,
  dependentSchemas = true, dependentRequired = true, dependencies = true,
}
-- Keywords whose value is one subschema.
local SCHEMA_KEYWORDS = {
  items = true, additionalProperties = true, additionalItems = true, contains = true,
  propertyNames = true, ["not"] = true, ["if"] = true, ["then"] = true, ["else"] = true,
  unevaluatedProperties = true, unevaluatedItems = true, contentSchema = true,
}
local SCHEMA_ARRAY_KEYWORDS = { allOf = true, anyOf = true, oneOf = true, prefixItems = true }

local mark_schema

local function copy_plain(v)
  if type(v) ~= "table" then return v end
  local out = {}
  for k, x in pairs(v) do out[k] = copy_plain(x) end
  return setmetatable(out, getmetatable(v))
end

--- A copy of a schema table with arrays and objects marked for the encoder.
mark_schema = function(s)
  if type(s) ~= "table" then return s end
  local out = core.object()
  for k, v in pairs(s) do
    if type(v) ~= "table" then
      out[k] = v
    elseif SCHEMA_ARRAY_KEYWORDS[k] then
      local a = core.array()
      for i, sub in ipairs(v) do a[i] = mark_schema(sub) end
      out[k] = a
    elseif ARRAY_KEYWORDS[k] or (k == "type") then
      out[k] = core.array(copy_plain(v))
    elseif MAP_KEYWORDS[k] then
      local m = core.object()
      for name, sub in pairs(v) do
        if k == "dependentRequired" or (k == "dependencies" and type(sub) == "table" and #sub > 0) then
          m[name] = core.array(copy_plain(sub))
        else
          m[name] = mark_schema(sub)
        end
      end
      out[k] = m
    elseif SCHEMA_KEYWORDS[k] then
      if k == "items" and #v > 0 and v.type == nil then
        local a = core.array() -- draft-07 tuple form
        for i, sub in ipairs(v) do a[i] = mark_schema(sub) end
        out[k] = a
      else
        out[k] = mark_schema(v)
      end
    else
      out[k] = copy_plain(v) -- const, default, and unknown keywords: as the encoder decides
    end
  end
  return out
end

--- A copy of a schema table marked so empty arrays and objects encode right.
M.mark = mark_schema

-- ---- Shaping values by their schema -------------------------------------

local function resolve(s, root)
  local seen = 0
  while type(s) == "table" and type(s["$ref"]) == "string" and seen < 16 do
    local target = root
    for part in s["$ref"]:gmatch("/([^/]*)") do
      part = part:gsub("~1", "/"):gsub("~0", "~")
      target = type(target) == "table" and target[part] or nil
    end
    if target == nil then return s end
    s, seen = target, seen + 1
  end
  return s
end

local function says_array(s)
  local t = s.type
  if t == "array" then return true end
  if type(t) == "table" then
    local array, object = false, false
    for _, x in ipairs(t) do
      array = array or x == "array"
      object = object or x == "object"
    end
    return array and not object
  end
  return s.items ~= nil or s.prefixItems ~= nil
end

local shape
shape = function(value, s, root, depth)
  root = root or s
  s = resolve(s, root)
  if type(value) ~= "table" or type(s) ~= "table" or depth > 64 then return value end
  if getmetatable(value) == nil and next(value) == nil then
    -- An empty table: the schema decides whether it is [] or {}.
    if says_array(s) then return core.array(value) end
    return value
  end
  if type(s.properties) == "table" then
    for k, sub in pairs(s.properties) do
      if value[k] ~= nil then value[k] = shape(value[k], sub, root, depth + 1) end
    end
  end
  if type(s.items) == "table" and #value > 0 then
    for i = 1, #value do value[i] = shape(value[i], s.items, root, depth + 1) end
  end
  if type(s.prefixItems) == "table" then
    for i, sub in ipairs(s.prefixItems) do
      if value[i] ~= nil then value[i] = shape(value[i], sub, root, depth + 1) end
    end
  end
  if type(s.allOf) == "table" then
    for _, sub in ipairs(s.allOf) do value = shape(value, sub, root, depth + 1) end
  end
  return value
end

--- Mark the empty tables inside value that the schema says are arrays, so
--- they are sent as [] (a Lua table cannot tell an empty array from an
--- empty object). Follows properties, items, prefixItems, allOf and local
--- $refs. Returns value.
---@param value any
---@param s table a schema as a Lua table
function M.shape(value, s)
  return shape(value, s, s, 0)
end

-- Compiled schemas for mcp.schema.validate, by the schema table or text.
local compiled_cache = setmetatable({}, { __mode = "k" })
local compiled_text_cache = {}

--- Compile a schema (a Lua table or JSON text). Raises with the JSON
--- pointer of the bad part when the schema is invalid.
function M.compile(s, what)
  return core.schema_compile(M.to_json(s), what or "schema")
end

--- Validate value against a JSON Schema (2020-12 by default; draft-07 when
--- its $schema says so).
---@param s table|string the schema
---@param value any
---@return boolean valid
---@return table? errors a list of {path, message} when not valid
function M.validate(s, value)
  local compiled
  if type(s) == "table" then
    compiled = compiled_cache[s]
    if not compiled then
      compiled = M.compile(s)
      compiled_cache[s] = compiled
    end
  else
    compiled = compiled_text_cache[s]
    if not compiled then
      compiled = M.compile(s)
      compiled_text_cache[s] = compiled
    end
  end
  if type(value) == "table" then value = shape(value, type(s) == "table" and s or core.json_decode(s), nil, 0) end
  local ok, report = core.schema_validate(compiled, value)
  if ok then return true end
  return false, report.errors, report.text
end

--- JSON text of a schema given as a Lua table or a JSON string.
---@param schema table|string
---@return string
function M.to_json(schema)
  if type(schema) == "string" then
    local ok, err = pcall(core.raw, schema)
    if not ok then error("schema is not valid JSON: " .. tostring(err), 0) end
    return schema
  end
  if type(schema) ~= "table" then
    error("a schema must be a table or a JSON string, not a " .. type(schema), 0)
  end
  return core.json_encode(mark_schema(schema))
end

return M
