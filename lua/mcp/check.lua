-- mcp.check: mistakes in what a script registers, caught when it loads.
--
-- Unknown fields in mcp.server/tool/resource/template/prompt are errors
-- with a suggestion ("descripton: did you mean description?"): a misspelt
-- field is otherwise silently ignored and the client sees a tool without
-- its description. Unknown keywords in a JSON Schema are warnings: JSON
-- Schema 2020-12 lets a schema carry keywords of its own (annotations,
-- vocabularies a client may know), so refusing them would refuse valid
-- schemas; but a misspelt keyword ("requried") checks nothing, so the
-- server says so on stderr, with the JSON pointer and a suggestion.

local core = require "mcp.core"

local M = {}

local function set(list)
  local s = {}
  for _, v in ipairs(list) do s[v] = true end
  return s
end

local COMMON = { "name", "title", "description", "icons", "_meta" }

local function fields(...)
  local list = {}
  for _, f in ipairs(COMMON) do list[#list + 1] = f end
  for _, f in ipairs { ... } do list[#list + 1] = f end
  return set(list)
end

--- The fields of one setting of mcp.server{config} (lua/mcp/config.lua):
--- an MCPB user_config entry's, in the order manifest.json lists them.
M.CONFIG_FIELDS = { "type", "title", "description", "required", "default", "multiple", "sensitive", "min", "max" }

--- The fields each kind of definition takes.
M.FIELDS = {
  server = fields("version", "websiteUrl", "instructions", "coerce", "ttlMs", "cacheScope", "requestStateTtlMs",
    "extensions", "author", "license", "icon", "config", "permissions", "auth"),
  config = set(M.CONFIG_FIELDS),
  tool = fields("inputSchema", "outputSchema", "annotations", "coerce", "timeout_ms", "task", "handler",
    "scopes"),
  ["tool task"] = set { "after_ms", "required", "poll_ms" },
  resource = fields("uri", "mimeType", "size", "annotations", "read", "ttlMs", "cacheScope", "scopes"),
  template = fields("uriTemplate", "mimeType", "annotations", "read", "complete", "ttlMs", "cacheScope", "scopes"),
  prompt = fields("arguments", "get", "complete", "scopes"),
  skill = set { "name", "description", "frontmatter", "read" },
}

-- Optimal string alignment distance (Levenshtein with transpositions).
local function distance(a, b)
  local la, lb = #a, #b
  local d = {}
  for i = 0, la do d[i] = { [0] = i } end
  for j = 0, lb do d[0][j] = j end
  for i = 1, la do
    for j = 1, lb do
      local cost = a:sub(i, i) == b:sub(j, j) and 0 or 1
      local v = math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
      if i > 1 and j > 1 and a:sub(i, i) == b:sub(j - 1, j - 1) and a:sub(i - 1, i - 1) == b:sub(j, j) then
        v = math.min(v, d[i - 2][j - 2] + 1)
      end
      d[i][j] = v
    end
  end
  return d[la][lb]
end

local function normalized(s) return (s:lower():gsub("[_%-]", "")) end

--- The candidate a misspelt word most likely meant, or nil.
function M.suggest(word, candidates)
  if type(word) ~= "string" then return nil end
  local best, best_d
  for c in pairs(candidates) do
    local d = normalized(word) == normalized(c) and 0 or distance(word, c)
    if d <= math.max(1, #c // 4) and (not best_d or d < best_d or (d == best_d and c < best)) then
      best, best_d = c, d
    end
  end
  return best
end

--- Raise on a field the kind does not take (level: the script's; label:
--- what the message calls def, by default mcp.KIND and its name).
function M.fields(kind, def, level, label)
  local known = M.FIELDS[kind]
  local unknown = {}
  for k in pairs(def) do
    if not known[k] then unknown[#unknown + 1] = tostring(k) end
  end
  if #unknown == 0 then return end
  table.sort(unknown)
  local f = unknown[1]
  local hint = M.suggest(f, known)
  label = label or ("mcp." .. kind .. (type(def.name) == "string" and (" " .. def.name) or ""))
  error(("%s: unknown field %s%s"):format(label, f, hint and (" (did you mean " .. hint .. "?)") or ""), level + 1)
end

--- scopes = {"notes:write", ...} on a tool, resource, template or prompt:
--- the OAuth scopes a caller needs. Returns them space-separated (what C
--- and the 403 challenge take), or nil when there are none.
function M.scopes(def, label, level)
  local scopes = def.scopes
  if scopes == nil then return nil end
  local function bad(why) error(("%s: scopes %s"):format(label, why), level + 2) end
  if type(scopes) ~= "table" then bad("must be a list of scope names, e.g. {\"notes:write\"}") end
  local count = 0
  for _ in pairs(scopes) do count = count + 1 end
  if count ~= #scopes then bad("must be a list (no keys), e.g. {\"notes:write\"}") end
  for i, s in ipairs(scopes) do
    if type(s) ~= "string" or s == "" or s:find("[%s%c\"\\]") then
      bad(("[%d] must be a non-empty scope name without spaces, quotes or backslashes, got %s")
        :format(i, type(s) == "string" and ("%q"):format(s) or type(s)))
    end
  end
  if #scopes == 0 then return nil end
  return table.concat(scopes, " ")
end

--- Tool names: what clients accept (SEP-986).
function M.tool_name(name, level)
  if not name:match("^[%w_.%-]+$") or #name > 128 then
    error(("tool name %q: use 1 to 128 of A-Z a-z 0-9 _ - . (no spaces)"):format(name), level + 1)
  end
end

-- ---- JSON Schema keywords ---------------------------------------------------

local KEYWORDS = set {
  "$schema", "$id", "$ref", "$anchor", "$dynamicRef", "$dynamicAnchor", "$vocabulary", "$comment", "$defs",
  "definitions", "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
  "maxLength", "minLength", "pattern", "maxItems", "minItems", "uniqueItems", "maxContains", "minContains",
  "maxProperties", "minProperties", "required", "dependentRequired", "dependencies", "format", "contentEncoding",
  "contentMediaType", "contentSchema", "title", "description", "default", "deprecated", "readOnly", "writeOnly",
  "examples", "items", "prefixItems", "additionalItems", "contains", "properties", "patternProperties",
  "additionalProperties", "propertyNames", "dependentSchemas", "unevaluatedItems", "unevaluatedProperties", "allOf",
  "anyOf", "oneOf", "not", "if", "then", "else",
}
-- Where subschemas are: one schema, a list of them, or a map of them.
local ONE = set { "additionalItems", "contains", "additionalProperties", "propertyNames", "unevaluatedItems",
  "unevaluatedProperties", "not", "if", "then", "else", "contentSchema" }
local LIST = set { "allOf", "anyOf", "oneOf", "prefixItems" }
local MAP = set { "properties", "patternProperties", "$defs", "definitions", "dependentSchemas" }

local function escape(key) return (tostring(key):gsub("~", "~0"):gsub("/", "~1")) end

local function walk(schema, pointer, found)
  if type(schema) ~= "table" or getmetatable(schema) == getmetatable(core.array()) then return end
  local keys = {}
  for k in pairs(schema) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  for _, k in ipairs(keys) do
    local v = schema[k]
    local here = pointer .. "/" .. escape(k)
    if type(k) == "string" and not KEYWORDS[k] and not k:match("^x%-") then
      found[#found + 1] = { pointer = pointer == "" and "/" or pointer, keyword = k, hint = M.suggest(k, KEYWORDS) }
    end
    if ONE[k] or (k == "items" and type(v) == "table" and #v == 0) then
      walk(v, here, found)
    elseif LIST[k] or (k == "items" and type(v) == "table") then
      for i, s in ipairs(v) do walk(s, here .. "/" .. (i - 1), found) end
    elseif MAP[k] and type(v) == "table" then
      for name, s in pairs(v) do walk(s, here .. "/" .. escape(name), found) end
    elseif k == "dependencies" and type(v) == "table" then
      for name, s in pairs(v) do
        if type(s) == "table" and #s == 0 then walk(s, here .. "/" .. escape(name), found) end
      end
    end
  end
end

--- Warn (stderr) about keywords JSON Schema does not define in a tool's
--- schema: `where` names the tool and schema, `line` the script line.
function M.schema_keywords(schema, where, line)
  local found = {}
  walk(schema, "", found)
  for _, f in ipairs(found) do
    core.stderr("warning", ("%s%s %s: unknown keyword %q%s: JSON Schema ignores it, so it checks nothing"):format(
      line and (line .. ": ") or "", where, f.pointer, f.keyword, f.hint and (" (did you mean " .. f.hint .. "?)") or ""))
  end
  return found
end

return M
