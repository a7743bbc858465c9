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
