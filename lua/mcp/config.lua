-- mcp.config: the settings a server asks its user for, declared with
-- mcp.server{ config = { api_key = { type = "string", title = ..., ... } } }.
--
-- The fields are those of an MCP Bundle's user_config (MANIFEST.md,
-- manifest_version 0.3), checked here when the script loads. `luamcp build
-- --mcpb` writes them into manifest.json, and maps each to an environment
-- variable in server.mcp_config.env: the key upper-cased (api_key ->
-- API_KEY), which is what scripts read with os.getenv. Claude Desktop asks
-- the user and sets the variables; under `luamcp run` the environment is
-- the user's own.

local core = require "mcp.core"
local check = require "mcp.check"

local M = {}

M.TYPES = { "string", "number", "boolean", "directory", "file" }

--- The environment variable a setting reaches the program in. The one
--- place that rule lives: the manifest, the start-up warning and the
--- guide (docs/shipping.md) all follow it.
function M.env_name(key) return key:upper() end

local function is_type(t)
  for _, known in ipairs(M.TYPES) do
    if t == known then return true end
  end
  return false
end

local function set_of(list)
  local s = {}
  for _, v in ipairs(list) do s[v] = true end
  return s
end

local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  return keys
end

-- One setting; raises at level (the script's line) naming config.KEY.
local function check_setting(key, s, level)
  local where = "config." .. key
  if type(s) ~= "table" then
    error(("%s must be a table { type = ..., title = ..., description = ... }, got %s"):format(where, type(s)), level + 1)
  end
  check.fields("config", s, level + 1, where)
  if not is_type(s.type) then
    local hint = check.suggest(s.type, set_of(M.TYPES))
    error(("%s: type must be one of %s, got %s%s"):format(where, table.concat(M.TYPES, ", "),
      s.type == nil and "nothing" or ("%q"):format(tostring(s.type)), hint and (" (did you mean " .. hint .. "?)") or ""),
      level + 1)
  end
  -- Required by the manifest schema: what Claude Desktop shows for the field.
  for _, f in ipairs { "title", "description" } do
    if type(s[f]) ~= "string" or s[f] == "" then
      error(("%s needs a %s (a non-empty string: Claude Desktop shows it beside the field)"):format(where, f), level + 1)
    end
  end
  for _, f in ipairs { "required", "sensitive", "multiple" } do
    if s[f] ~= nil and type(s[f]) ~= "boolean" then
      error(("%s: %s must be true or false, got %s"):format(where, f, type(s[f])), level + 1)
    end
  end
  if s.sensitive and s.type ~= "string" then
    error(("%s: sensitive applies to type \"string\" (masked input, kept in the system keychain)"):format(where),
      level + 1)
  end
  if s.multiple ~= nil and s.type ~= "directory" and s.type ~= "file" then
    error(("%s: multiple applies to type \"directory\" or \"file\""):format(where), level + 1)
  end
  if s.multiple then
    -- MCPB expands a list only into command arguments; in an environment
    -- variable the host leaves "${user_config.KEY}" unreplaced.
    error(("%s: multiple = true cannot reach the program: a list of paths is passed only as command arguments, "
      .. "and luamcp passes each setting as the environment variable %s"):format(where, M.env_name(key)), level + 1)
  end
  for _, f in ipairs { "min", "max" } do
    if s[f] ~= nil then
      if s.type ~= "number" then error(("%s: %s applies to type \"number\""):format(where, f), level + 1) end
      if type(s[f]) ~= "number" then error(("%s: %s must be a number, got %s"):format(where, f, type(s[f])), level + 1) end
    end
  end
  if s.min and s.max and s.min > s.max then
    error(("%s: min %s is more than max %s"):format(where, s.min, s.max), level + 1)
  end
  if s.default ~= nil then
    local want = (s.type == "number" or s.type == "boolean") and s.type or "string"
    if type(s.default) ~= want then
      error(("%s: default must be a %s for type %q, got %s"):format(where, want, s.type, type(s.default)), level + 1)
    end
    if want == "number" and ((s.min and s.default < s.min) or (s.max and s.default > s.max)) then
      error(("%s: default %s is outside min..max"):format(where, s.default), level + 1)
    end
  end
end

--- Check mcp.server{}'s config table; raises at level with file and line.
function M.check(config, level)
  if type(config) ~= "table" then
    error(("config must be a table of settings by name ({ api_key = { type = ..., title = ..., description = ... } }), "
      .. "got %s"):format(type(config)), level + 1)
  end
  local by_env = {}
  for _, key in ipairs(sorted_keys(config)) do
    -- The key becomes an environment variable name and a ${user_config.KEY}
    -- placeholder: letters, digits and _ keep both plain.
    if type(key) ~= "string" or not key:match("^[%a_][%w_]*$") then
      error(("config key %s: use letters, digits and _, not starting with a digit (it becomes an environment variable "
        .. "name)"):format(type(key) == "string" and ("%q"):format(key) or tostring(key)), level + 1)
    end
    check_setting(key, config[key], level + 1)
    local env = M.env_name(key)
    if by_env[env] then
      error(("config keys %s and %s would both be the environment variable %s"):format(by_env[env], key, env), level + 1)
    end
    by_env[env] = key
  end
end

--- The settings for manifest.json, in key order: { key, env, fields =
--- { {name, JSON text}, ... } } with the fields in check.CONFIG_FIELDS's order.
function M.manifest_entries(config)
  local entries = {}
  for _, key in ipairs(sorted_keys(config or {})) do
    local s = config[key]
    local fields = {}
    for _, f in ipairs(check.CONFIG_FIELDS) do
      if s[f] ~= nil then fields[#fields + 1] = { f, core.json_encode(s[f]) } end
    end
    entries[#entries + 1] = { key = key, env = M.env_name(key), fields = fields }
  end
  return entries
end

--- Warn on stderr, once when serving starts, about each required setting
--- whose environment variable is unset or empty: the server starts anyway
--- (a tool that does not need it still works), but says why one may fail.
function M.warn_unset(config)
  for _, key in ipairs(sorted_keys(config or {})) do
    local s, env = config[key], M.env_name(key)
    local value = core.getenv(env)
    if s.required and (value == nil or value == "") then
      core.stderr("warning", ("%s is not set: mcp.server{} config %s (%q) is required, and os.getenv(%q) returns %s. "
        .. "Set it in the environment (Claude Desktop sets it from the extension's settings)."):format(
        env, key, s.title, env, value == nil and "nil" or '""'))
    end
  end
end

return M
