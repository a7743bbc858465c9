-- mcp.uri_template: RFC 6570 URI templates, for matching resource URIs.
--
-- Supported: literal text and simple `{var}` expressions (one or more
-- characters up to the next "/", "?" or "#", percent-decoded), plus
-- `{+var}` reserved expansion (any characters, "/" included). A template
-- with other operators is refused at registration.

local M = {}

local function escape_pattern(s)
  return (s:gsub("[%^%$%(%)%%%.%[%]%*%+%-%?]", "%%%0"))
end

local function percent_decode(s)
  return (s:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end))
end

--- Compile a template. Returns a matcher object, or nil and an error.
---@param template string
function M.compile(template)
  local parts, names = { "^" }, {}
  local pos = 1
  while true do
    local s, e, op, name = template:find("{([+]?)([%w_%.]+)}", pos)
    local literal = template:sub(pos, (s or #template + 1) - 1)
    if literal:find("[{}]") then
      return nil, ("unsupported expression near %q (only {var} and {+var})"):format(literal)
    end
    parts[#parts + 1] = escape_pattern(literal)
    if not s then break end
    parts[#parts + 1] = op == "+" and "(.+)" or "([^/?#]+)"
    names[#names + 1] = name
    pos = e + 1
  end
  parts[#parts + 1] = "$"
  return { pattern = table.concat(parts), names = names, template = template }
end

--- The variables of uri if it matches, else nil.
function M.match(compiled, uri)
  local captures = { uri:match(compiled.pattern) }
  if #captures == 0 then
    if #compiled.names == 0 and uri:match(compiled.pattern) then return {} end
    return nil
  end
  local vars = {}
  for i, name in ipairs(compiled.names) do vars[name] = percent_decode(captures[i]) end
  return vars
end

return M
