-- mcp.inspect: `luamcp inspect`'s text, from what a server lists. Used by
-- the server's own library (lua/mcp.lua's _inspect, for a folder loaded
-- here) and by the client (lua/mcp/cli.lua, for a server reached over
-- stdio or HTTP): neither needs anything of the other.

local M = {}

local function shown_with(encode)
  return function(v) return type(v) == "string" and v or encode(v) end
end

local function schema_lines(out, schema, indent, encode)
  if type(schema) ~= "table" or type(schema.properties) ~= "table" then return end
  local shown = shown_with(encode)
  local required = {}
  for _, name in ipairs(type(schema.required) == "table" and schema.required or {}) do required[name] = true end
  local names = {}
  for name in pairs(schema.properties) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do
    local p = schema.properties[name]
    if type(p) ~= "table" then p = {} end
    local kind = p.type or "any"
    if type(kind) == "table" then
      local kinds = {}
      for i, k in ipairs(kind) do kinds[i] = shown(k) end
      kind = table.concat(kinds, "|")
    end
    kind = shown(kind)
    if kind == "array" and type(p.items) == "table" and type(p.items.type) == "string" then
      kind = "array of " .. p.items.type
    end
    local facts = { kind }
    if required[name] then facts[#facts + 1] = "required" end
    if p.default ~= nil then facts[#facts + 1] = "default " .. encode(p.default) end
    if p.enum then facts[#facts + 1] = "one of " .. encode(p.enum) end
    if p.minimum or p.maximum then
      facts[#facts + 1] = ("%s..%s"):format(p.minimum or "", p.maximum or "")
    end
    if p.minLength or p.maxLength then
      facts[#facts + 1] = ("length %s..%s"):format(p.minLength or "", p.maxLength or "")
    end
    if p.minItems or p.maxItems then
      facts[#facts + 1] = ("%s..%s items"):format(p.minItems or "", p.maxItems or "")
    end
    out[#out + 1] = ("%s%s: %s%s"):format(indent, name, table.concat(facts, ", "),
      type(p.description) == "string" and (" — " .. p.description) or "")
  end
end

--- The text of an inspection. view: server (serverInfo), instructions,
--- tools, resources, resourceTemplates, prompts (wire entries), and when
--- the scripts are loaded here (loaded = true) what only they tell:
--- permissions (a summary, nil for none declared) and tasks (tool name ->
--- {support, ms}). Another server's entries are taken as they come: what
--- is not text is shown as JSON. encode: a JSON encoder.
function M.text(view, encode)
  local out = {}
  local shown = shown_with(encode)
  local s = type(view.server) == "table" and view.server or {}
  out[1] = ("%s %s%s"):format(shown(s.name), shown(s.version), type(s.title) == "string" and (" — " .. s.title) or "")
  if type(view.instructions) == "string" then out[#out + 1] = "  " .. view.instructions end
  if view.loaded then
    out[#out + 1] = "Permissions: " .. (view.permissions or "none declared: runs unconfined")
  end
  local tasks = view.tasks or {}
  local function section(title, list, head, body)
    out[#out + 1] = ""
    out[#out + 1] = ("%s (%d)"):format(title, #list)
      for _, e in ipairs(list) do
      local line = "  " .. head(e)
      local about = e.title or e.description
      if type(about) == "string" then line = line .. " — " .. about end
      out[#out + 1] = line
      if body then body(e) end
    end
  end
  section("Tools", view.tools, function(t) return shown(t.name) end, function(t)
    schema_lines(out, t.inputSchema, "    ", encode)
    if t.outputSchema then out[#out + 1] = "    returns structured content" end
    local task = tasks[t.name]
    if task then
      out[#out + 1] = ("    %s for clients that support tasks%s"):format(task[1] == "required" and "only as a task" or "a task",
        task[2] > 0 and (", once it runs " .. task[2] .. " ms") or "")
    end
  end)
  section("Resources", view.resources, function(r)
    return shown(r.uri) .. (type(r.mimeType) == "string" and (" (" .. r.mimeType .. ")") or "")
  end)
  section("Resource templates", view.resourceTemplates, function(r) return shown(r.uriTemplate) end)
  section("Prompts", view.prompts, function(p) return shown(p.name) end, function(p)
    for _, a in ipairs(type(p.arguments) == "table" and p.arguments or {}) do
      out[#out + 1] = ("    %s%s%s"):format(shown(a.name), a.required == true and " (required)" or "",
        type(a.description) == "string" and (" — " .. a.description) or "")
    end
  end)
  return table.concat(out, "\n") .. "\n"
end

return M
