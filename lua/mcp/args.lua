-- mcp.args: a tool's arguments in one line each, expanded to JSON Schema
-- 2020-12 (mcp.tool{args = ..., returns = ...}).
--
--   args = {
--     name  = "string -- who to greet",        -- required, with a description
--     count = "integer? 1..10",                -- optional, with bounds
--     tags  = { "string" },                    -- an array ("string[]" too)
--     point = { x = "number", y = "number" },  -- a nested object
--     mode  = mcp.enum { "fast", "slow" },     -- one of these values
--     limit = mcp.arg("integer", "at most this many", { default = 20, min = 1 }),
--   }
--
-- A type is "string", "integer", "number", "boolean", "object" (any
-- object), "array" (any array) or "any" (any JSON value), then "[]" for an
-- array of it, "?" for optional, "MIN..MAX" for bounds (the value of a
-- number, the length of a string or array) and "-- text" for the
-- description. An object's properties are required unless marked optional
-- or given a default, and it takes no property it does not name
-- (additionalProperties false), so a misspelt argument is refused rather
-- than ignored. Mistakes raise naming the argument's path
-- ("args.count: unknown type interger (did you mean integer?)").

local check = require "mcp.check"

local M = {}

-- The values mcp.arg and mcp.enum return: an expanded schema and whether
-- the property it describes may be omitted.
local Arg = {}
Arg.__index = Arg

local TYPES = { string = true, integer = true, number = true, boolean = true, object = true, array = true,
                any = true }

-- Names from other languages, for the hint of an unknown type.
local LIKELY = { int = "integer", long = "integer", float = "number", double = "number", num = "number",
                 bool = "boolean", str = "string", text = "string", list = "array", table = "object",
                 dict = "object", map = "object", null = "any", ["nil"] = "any" }

-- Which keywords "MIN..MAX" and mcp.arg's min and max become, by type.
local BOUNDS = {
  integer = { "minimum", "maximum" }, number = { "minimum", "maximum" },
  string = { "minLength", "maxLength" }, array = { "minItems", "maxItems" },
  object = { "minProperties", "maxProperties" },
}

-- mcp.arg's options besides JSON Schema keywords.
local OPTIONS = { optional = true, min = true, max = true }

local function copy(v)
  if type(v) ~= "table" then return v end
  local out = {}
  for k, x in pairs(v) do out[k] = copy(x) end
  return setmetatable(out, getmetatable(v))
end

local function fail(path, message)
  error((path and (path .. ": ") or "") .. message, 0)
end

local function apply_bounds(schema, min, max, path)
  if min == nil and max == nil then return end
  local keywords = BOUNDS[schema.type]
  if not keywords then
    fail(path, ("bounds apply to numbers, strings, arrays and objects, not to %s"):format(schema.type or "any"))
  end
  local given = { min, max }
  for i = 1, 2 do
    local v = given[i]
    if v ~= nil then
      if type(v) ~= "number" then fail(path, ("%s must be a number, got %s"):format(i == 1 and "min" or "max", type(v))) end
      if keywords[1] ~= "minimum" and math.type(v) ~= "integer" then
        v = math.tointeger(v) or fail(path, ("a %s's length bound must be a whole number, got %s"):format(schema.type, v))
      end
      schema[keywords[i]] = v
    end
  end
  if min ~= nil and max ~= nil and min > max then fail(path, ("min %s is above max %s"):format(min, max)) end
end

-- "integer? 1..10 -- how many": {type = "integer", minimum = 1, maximum = 10,
-- description = "how many"}, true (optional).
local function from_string(text, path)
  local body, description = text:match("^(.-)%s*%-%-%s*(.*)$")
  body = body or text
  local name, list, optional, rest = body:match("^%s*([%a_][%w_]*)(%[?%]?)(%??)%s*(.-)%s*$")
  if not name or (list ~= "" and list ~= "[]") then
    fail(path, ("%q is not a type: write \"string\", \"integer?\", \"string[]\", \"number 0..1 -- what it is\""):format(text))
  end
  if not TYPES[name] then
    local hint = LIKELY[name:lower()] or check.suggest(name, TYPES)
    fail(path, ("unknown type %s%s; the types are string, integer, number, boolean, object, array and any"):format(name,
      hint and (" (did you mean " .. hint .. "?)") or ""))
  end
  local schema = name == "any" and {} or { type = name }
  if list == "[]" then schema = name == "any" and { type = "array" } or { type = "array", items = schema } end
  if rest ~= "" then
    local min, max = rest:match("^(%-?[%d.]*)%.%.(%-?[%d.]*)$")
    local lo, hi = tonumber(min), tonumber(max)
    if not min or (min ~= "" and not lo) or (max ~= "" and not hi) or (not lo and not hi) then
      fail(path, ("%q: after the type come bounds (1..10, 0.., ..100) and \"-- description\"%s"):format(text,
        rest:match("^=") and ("; a default is mcp.arg(\"" .. name .. "\", { default = ... })") or ""))
    end
    apply_bounds(schema, math.tointeger(lo) or lo, math.tointeger(hi) or hi, path)
  end
  if description and description ~= "" then schema.description = description end
  return schema, optional == "?"
end

local expand

-- A table: {TYPE} is an array of TYPE; {name = TYPE, ...} an object.
local function from_table(t, path)
  local n, keys = #t, 0
  for _ in pairs(t) do keys = keys + 1 end
  if n > 0 and keys ~= n then
    fail(path, "mixes list items and named fields: {TYPE} is an array of TYPE, {name = TYPE, ...} an object")
  end
  if n > 0 then
    if n == 1 then
      local items, optional = expand(t[1], (path or "") .. "[1]")
      if optional then fail(path, "an array's items cannot be optional (write {\"string\"}, and \"string[]?\" for an optional array)") end
      return { type = "array", items = items }, false
    end
    local strings = true
    for _, v in ipairs(t) do strings = strings and type(v) == "string" end
    fail(path, ("a list of %d: {TYPE} is an array of TYPE%s"):format(n,
      strings and (", and mcp.enum{...} one of some values (did you mean mcp.enum{ \"" .. table.concat(t, "\", \"") .. "\" }?)") or ""))
  end
  local properties, required = {}, {}
  for k, v in pairs(t) do
    if type(k) ~= "string" then
      fail(path, ("%s is not an argument name: an object's fields are name = TYPE"):format(tostring(k)))
    end
    local optional
    properties[k], optional = expand(v, path and (path .. "." .. k) or k)
    if not optional then required[#required + 1] = k end
  end
  table.sort(required)
  local schema = { type = "object", properties = properties, additionalProperties = false }
  if #required > 0 then schema.required = required end
  return schema, false
end

--- The JSON Schema (a fresh table) a shorthand spec stands for, and
--- whether the property it describes may be omitted. Raises "path: why".
expand = function(spec, path)
  if type(spec) == "string" then return from_string(spec, path) end
  if getmetatable(spec) == Arg then return copy(spec.schema), spec.optional end
  if type(spec) == "table" and getmetatable(spec) == nil then return from_table(spec, path) end
  fail(path, ("expected a type (\"string\", \"integer?\", {\"string\"}, {name = \"string\"}, mcp.enum{...}), got %s %s")
    :format(type(spec), tostring(spec)))
end

-- The options of mcp.arg and mcp.enum: optional, default, min, max, and
-- any JSON Schema keyword, laid over schema.
local function apply_options(schema, optional, options, what, level)
  if options == nil then return schema, optional end
  if type(options) ~= "table" then error(("%s: options must be a table, got %s"):format(what, type(options)), level) end
  for k in pairs(options) do
    if not OPTIONS[k] and not check.SCHEMA_KEYWORDS[k] and not (type(k) == "string" and k:match("^x%-")) then
      local known = {}
      for o in pairs(OPTIONS) do known[o] = true end
      for o in pairs(check.SCHEMA_KEYWORDS) do known[o] = true end
      local hint = check.suggest(k, known)
      error(("%s: unknown option %s%s (options: optional, default, min, max, or a JSON Schema keyword)")
        :format(what, tostring(k), hint and (" (did you mean " .. hint .. "?)") or ""), level)
    end
  end
  local ok, err = pcall(apply_bounds, schema, options.min, options.max, nil)
  if not ok then error(what .. ": " .. err, level) end
  -- required = true/false (as prompts' arguments and config settings say
  -- it) is the opposite of optional; a list is JSON Schema's own required.
  local required
  if type(options.required) == "boolean" then required = options.required end
  for k, v in pairs(options) do
    if not OPTIONS[k] and not (k == "required" and type(v) == "boolean") then schema[k] = copy(v) end
  end
  if required ~= nil then optional = not required end
  if options.optional ~= nil then optional = options.optional and true or false end
  if options.default ~= nil then
    optional = true
    local valid, errors = require("mcp.schema").validate(schema, options.default)
    if not valid then
      local where = errors[1].path
      error(("%s: the default %s does not fit: %s%s"):format(what, require("mcp.core").json_encode(options.default),
        (where ~= "" and where ~= "/") and (where .. ": ") or "", errors[1].message), level)
    end
  end
  return schema, optional
end

local function new_arg(schema, optional)
  return setmetatable({ schema = schema, optional = optional }, Arg)
end

--- mcp.arg(spec, description?, options?): spec with a description and
--- options (optional, default, min, max, JSON Schema keywords).
function M.arg(spec, description, options)
  if type(description) == "table" and options == nil then description, options = nil, description end
  if description ~= nil and type(description) ~= "string" then
    error(("mcp.arg: the description must be a string, got %s"):format(type(description)), 2)
  end
  local ok, schema, optional = pcall(expand, spec, nil)
  if not ok then error("mcp.arg: " .. schema, 2) end
  if description then schema.description = description end
  return new_arg(apply_options(schema, optional, options, "mcp.arg", 3))
end

--- mcp.enum(values, description?, options?): one of values (strings,
--- numbers or booleans; the type follows from them).
function M.enum(values, description, options)
  if type(description) == "table" and options == nil then description, options = nil, description end
  if type(values) ~= "table" or #values == 0 then error("mcp.enum needs a list of values: mcp.enum{ \"a\", \"b\" }", 2) end
  if description ~= nil and type(description) ~= "string" then
    error(("mcp.enum: the description must be a string, got %s"):format(type(description)), 2)
  end
  local kinds = {}
  for i, v in ipairs(values) do
    local kind = math.type(v) or type(v)
    if kind ~= "string" and kind ~= "integer" and kind ~= "float" and kind ~= "boolean" then
      error(("mcp.enum: value %d is a %s; values are strings, numbers or booleans"):format(i, type(v)), 2)
    end
    kinds[kind] = true
  end
  local schema = { enum = copy(values) }
  if kinds.string and not (kinds.integer or kinds.float or kinds.boolean) then schema.type = "string"
  elseif kinds.boolean and not (kinds.integer or kinds.float or kinds.string) then schema.type = "boolean"
  elseif kinds.integer and not (kinds.float or kinds.string or kinds.boolean) then schema.type = "integer"
  elseif not (kinds.string or kinds.boolean) then schema.type = "number" end
  if description then schema.description = description end
  return new_arg(apply_options(schema, false, options, "mcp.enum", 3))
end

--- The object schema of a tool's `args` or `returns` (field names which),
--- or nil and "field.path: why".
function M.object_schema(spec, field)
  local ok, schema = pcall(expand, spec, field)
  if not ok then return nil, schema end
  if schema.type ~= "object" then
    if field == "returns" then
      return nil, "returns must describe an object (structuredContent is always a JSON object): "
        .. "name the list, as returns = { items = { ... } }"
    end
    return nil, ("%s must describe an object: {name = TYPE, ...}"):format(field)
  end
  return schema
end

--- A prompt's `args` as its arguments list ({name, description?,
--- required}, by name: a Lua table keeps no order), plus each argument's
--- enum values and default by name; or nil and "args.name: why". Prompt
--- arguments are strings.
function M.prompt_arguments(spec)
  if type(spec) ~= "table" or getmetatable(spec) ~= nil or #spec > 0 then
    return nil, "args must be a table of names: {topic = \"string -- what to write about\", ...}"
  end
  local names = {}
  for name in pairs(spec) do
    if type(name) ~= "string" then return nil, ("args: %s is not an argument name"):format(tostring(name)) end
    names[#names + 1] = name
  end
  table.sort(names)
  local list, enums, defaults = {}, {}, {}
  for i, name in ipairs(names) do
    local ok, schema, optional = pcall(expand, spec[name], "args." .. name)
    if not ok then return nil, schema end
    if schema.type ~= "string" then
      return nil, ("args.%s: prompt arguments are strings, not %s"):format(name, schema.type or "any")
    end
    list[i] = { name = name, description = schema.description, required = not optional }
    enums[name], defaults[name] = schema.enum, schema.default
  end
  return list, enums, defaults
end

--- The completions of a prompt: those given, plus, for an argument with
--- enum values and no completion of its own, the values it starts with.
function M.enum_completions(enums, given)
  local complete = {}
  for name, fn in pairs(given or {}) do complete[name] = fn end
  for name, values in pairs(enums) do
    if complete[name] == nil then
      complete[name] = function(value)
        local found = {}
        for _, v in ipairs(values) do
          if v:sub(1, #value) == value then found[#found + 1] = v end
        end
        return found
      end
    end
  end
  return next(complete) and complete or nil
end

--- Fill in the defaults a shorthand schema declares, where value leaves
--- them out, following the properties of objects and the items of arrays.
function M.fill_defaults(value, schema)
  if type(value) ~= "table" or type(schema) ~= "table" then return value end
  if type(schema.properties) == "table" then
    for k, sub in pairs(schema.properties) do
      if value[k] == nil and sub.default ~= nil then value[k] = copy(sub.default) end
      if value[k] ~= nil then M.fill_defaults(value[k], sub) end
    end
  elseif type(schema.items) == "table" then
    for _, item in ipairs(value) do M.fill_defaults(item, schema.items) end
  end
  return value
end

return M
