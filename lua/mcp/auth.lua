-- mcp.server{ auth = {...} }: the OAuth 2.1 resource server's settings
-- (docs/authorization.md). Checked at the script's line; the runtime reads
-- them (as JSON, through mcp._describe) once the scripts have loaded, and
-- every --auth-* flag the operator gives wins over its field.
local check = require "mcp.check"

local M = {}

local STRINGS = { "issuer", "audience", "jwks_uri", "jwks_file", "introspection_endpoint", "client_id",
  "client_secret_env" }
local LISTS = { "scopes", "algorithms" }
local FIELDS = { leeway_s = true }
-- AUTH_MAX_LEEWAY_S (runtime/core/luamcp_limits.h), the --auth-leeway cap.
local MAX_LEEWAY_S = 600
for _, k in ipairs(STRINGS) do FIELDS[k] = true end
for _, k in ipairs(LISTS) do FIELDS[k] = true end
check.FIELDS.auth = FIELDS

local function fail(msg, level) error("mcp.server auth: " .. msg, level + 1) end

--- Check t (level: the script's) and return it normalized.
function M.declare(t, level)
  if type(t) ~= "table" then fail("a table is needed (issuer, audience, scopes, ...)", level + 1) end
  check.fields("auth", t, level + 1, "mcp.server auth")
  for _, k in ipairs(STRINGS) do
    if t[k] ~= nil and (type(t[k]) ~= "string" or t[k] == "") then fail(k .. " must be a non-empty string", level + 1) end
  end
  for _, k in ipairs(LISTS) do
    local v = t[k]
    if type(v) == "string" then v = { v } end
    if v ~= nil then
      if type(v) ~= "table" then fail(k .. " must be a list of strings", level + 1) end
      for i, s in ipairs(v) do
        if type(s) ~= "string" or s == "" or s:find("[%s\"\\]") then
          fail(("%s[%d] must be one word (no spaces or quotes)"):format(k, i), level + 1)
        end
      end
    end
  end
  if t.leeway_s ~= nil and (math.type(t.leeway_s) ~= "integer" or t.leeway_s < 0 or t.leeway_s > MAX_LEEWAY_S) then
    fail(("leeway_s must be a whole number of seconds (0 to %d)"):format(MAX_LEEWAY_S), level + 1)
  end
  if t.issuer == nil then fail("issuer is required (the authorization server's issuer URL)", level + 1) end
  if t.jwks_file and t.jwks_uri then fail("give jwks_uri or jwks_file, not both", level + 1) end
  return t
end

--- What the runtime reads: {"issuer":..., "scopes":"a b", ...}, or nil.
function M.json(core, t)
  if not t then return nil end
  local out = {}
  for _, k in ipairs(STRINGS) do out[k] = t[k] end
  for _, k in ipairs(LISTS) do
    local v = t[k]
    if type(v) == "string" then v = { v } end
    if v then out[k] = table.concat(v, " ") end
  end
  out.leeway_s = t.leeway_s
  return core.json_encode(core.object(out))
end

return M
