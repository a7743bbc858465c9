-- mcp.skills: Agent Skills served over MCP (the skills extension,
-- io.modelcontextprotocol/skills, SEP-2640).
--
-- A `skills/` folder beside the scripts (or in a built program's bundle)
-- holds skills: folders with a SKILL.md whose YAML front matter has at
-- least name and description. Every file of a skill is a resource at
-- skill://<skill-path>/<file>, where <skill-path> is the folder's path
-- under skills/ and ends with the skill's name. The files are read once,
-- when the scripts load (and again at each reload), so the digests and
-- sizes that skills/list and skills/get publish are those of the bytes
-- resources/read serves. mcp.skill{...} adds a generated skill whose files
-- come from a function (resources = "dynamic").

local core = require "mcp.core"
local registry = require "mcp.registry"

local array, object = core.array, core.object
local rpc_error = core.rpc_error
local INVALID_PARAMS = core.INVALID_PARAMS

local M = {}

M.EXTENSION = "io.modelcontextprotocol/skills"
-- The extension's per-skill limits: hosts must accept up to these.
local MAX_FILES, MAX_BYTES = 512, 16 * 1024 * 1024

-- Skills by the URI of their SKILL.md, and in URI order.
M.by_uri, M.list = {}, {}
-- Directory URI -> its direct children, {uri, name, mimeType}, sorted.
local directories = {}

local MIME = {
  md = "text/markdown", markdown = "text/markdown", txt = "text/plain", py = "text/x-python", sh = "text/x-shellscript",
  lua = "text/x-lua", js = "text/javascript", ts = "text/typescript", json = "application/json",
  yaml = "application/yaml", yml = "application/yaml", html = "text/html", css = "text/css", csv = "text/csv",
  xml = "application/xml", toml = "application/toml", png = "image/png", jpg = "image/jpeg", jpeg = "image/jpeg",
  gif = "image/gif", svg = "image/svg+xml", pdf = "application/pdf",
}

local function mime_of(name)
  local ext = name:match("%.([%w]+)$")
  return ext and MIME[ext:lower()] or "application/octet-stream"
end

-- The Agent Skills naming rule: lowercase letters, digits and single
-- hyphens inside, 1 to 64 characters.
local function valid_name(name)
  return type(name) == "string" and #name >= 1 and #name <= 64 and name:match("^[a-z0-9%-]+$") ~= nil
    and name:sub(1, 1) ~= "-" and name:sub(-1) ~= "-" and not name:find("--", 1, true)
end

-- A path segment may go into a URI as it is.
local function uri_safe(segment) return segment:match("^[A-Za-z0-9._~%-]+$") ~= nil end

-- The line in text where `key:` starts, for messages.
local function line_of(text, key)
  local n = 1
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    if line:match("^" .. key .. "%s*:") then return n end
    n = n + 1
  end
  return 1
end

--- SKILL.md's front matter as a table, or raises "file:line: problem".
function M.front_matter(text, where)
  local body = text:match("^%-%-%-\r?\n(.-\r?\n)%-%-%-%s*\r?\n") or text:match("^%-%-%-\r?\n(.-\r?\n)%-%-%-%s*$")
  if not body then error(where .. ":1: SKILL.md must begin with YAML front matter between --- lines", 0) end
  local value, problem = core.yaml_decode(body)
  if problem then
    local line, rest = problem:match("^line (%d+): (.*)$")
    error(("%s:%d: front matter: %s"):format(where, (tonumber(line) or 0) + 1, rest or problem), 0)
  end
  if type(value) ~= "table" or getmetatable(value) == getmetatable(array()) then
    error(where .. ":2: the front matter must be a mapping (name: ..., description: ...)", 0)
  end
  for _, key in ipairs { "name", "description" } do
    if type(value[key]) ~= "string" or value[key] == "" then
      error(("%s:%d: the front matter needs %s (a string)"):format(where, line_of(body, key) + 1, key), 0)
    end
  end
  local meta = value.metadata
  if type(meta) == "table" then
    for k in pairs(meta) do
      if type(k) == "string" and k:sub(1, 24) == "io.modelcontextprotocol/" then
        error(("%s:%d: metadata keys under io.modelcontextprotocol/ are reserved for MCP extensions"):format(where,
          line_of(body, "metadata") + 1), 0)
      end
    end
  end
  return value, body
end

local function add_child(dir, child)
  local list = directories[dir]
  if not list then
    list = {}
    directories[dir] = list
  end
  for _, c in ipairs(list) do
    if c.uri == child.uri then return end
  end
  list[#list + 1] = child
end

-- Every directory from the skill's root down to the file's folder lists
-- what is directly inside it.
local function note_path(root_uri, rel, file_entry)
  local dir = root_uri
  local parts = {}
  for part in rel:gmatch("[^/]+") do parts[#parts + 1] = part end
  for i = 1, #parts - 1 do
    local sub = dir .. "/" .. parts[i]
    add_child(dir, { uri = sub, name = parts[i], mimeType = "inode/directory" })
    dir = sub
  end
  add_child(dir, file_entry)
end

local function is_utf8(bytes) return utf8.len(bytes) ~= nil end

-- Serve one file of a skill as a resource (unlisted files would hide them
-- from hosts that browse resources; the extension exposes every file).
local function serve_file(serve, uri, rel, name, description, bytes)
  local mime = mime_of(rel)
  local text = is_utf8(bytes) and (mime:match("^text/") or mime:match("json$") or mime:match("yaml$")
    or mime:match("xml$") or mime:match("toml$"))
  serve { uri = uri, name = name, description = description, mimeType = mime, size = #bytes,
    read = function() if text then return { text = bytes } end return { blob = bytes } end }
  return mime
end

--- Load skills/ (from the folder or the bundle), serving each file with
--- serve{uri, name, description, mimeType, size, read} (mcp.resource).
--- Raises "file:line: problem" for a SKILL.md that cannot be served.
function M.load(bundle, serve)
  local files = bundle.list("skills")
  local skill_dirs = {}
  for _, name in ipairs(files) do
    local dir = name:match("^(skills/.+)/SKILL%.md$")
    if dir then skill_dirs[#skill_dirs + 1] = dir end
  end
  local names = {}
  for _, dir in ipairs(skill_dirs) do
    local path = dir:sub(#"skills/" + 1)
    local where = dir .. "/SKILL.md"
    local text = assert(bundle.read(where))
    local fm = M.front_matter(text, where)
    local last = path:match("([^/]+)$")
    if fm.name ~= last then
      error(("%s:%d: name %q must be the skill's folder name, %q"):format(where, line_of(text, "name"),
        fm.name, last), 0)
    end
    if not valid_name(fm.name) then
      error(("%s:%d: name %q: lowercase letters, digits and single hyphens inside, at most 64 characters"):format(
        where, line_of(text, "name"), fm.name), 0)
    end
    for segment in path:gmatch("[^/]+") do
      if not uri_safe(segment) then
        error(("%s: the folder name %q cannot be part of a skill:// URI (use letters, digits, . _ ~ -)"):format(where,
          segment), 0)
      end
    end
    if names[fm.name] then
      error(("%s: another skill is named %s too (%s); skill names must be unique"):format(where, fm.name,
        names[fm.name]), 0)
    end
    names[fm.name] = where
    local root = "skill://" .. path
    local resources, total = array(), 0
    for _, name in ipairs(files) do
      if name:sub(1, #dir + 1) == dir .. "/" then
        local rel = name:sub(#dir + 2)
        local bytes = assert(bundle.read(name))
        total = total + #bytes
        local uri = root .. "/" .. rel
        resources[#resources + 1] = object { uri = uri, digest = "sha256:" .. core.sha256(bytes), size = #bytes }
        if #resources > MAX_FILES or total > MAX_BYTES then
          error(("%s: the skill is larger than a host must accept (%d files and %d bytes at most)"):format(where,
            MAX_FILES, MAX_BYTES), 0)
        end
        if not registry.resources:get(uri) then
          local is_skill_md = rel == "SKILL.md"
          local mime = serve_file(serve, uri, rel, is_skill_md and fm.name or rel, is_skill_md and fm.description or nil, bytes)
          note_path(root, rel, object { uri = uri, name = rel:match("([^/]+)$"), mimeType = mime })
        end
      end
    end
    table.sort(resources, function(a, b) return a.uri < b.uri end)
    local entry = { uri = root .. "/SKILL.md", frontmatter = fm, resources = resources }
    M.by_uri[entry.uri] = entry
    M.list[#M.list + 1] = entry
  end
  table.sort(M.list, function(a, b) return a.uri < b.uri end)
  for _, children in pairs(directories) do
    table.sort(children, function(a, b) return a.uri < b.uri end)
  end
end

--- mcp.skill{name, description, frontmatter?, read = function(path, ctx)}:
--- a skill made by a function; read("SKILL.md") returns its SKILL.md.
function M.define(def, serve_template)
  if type(def) ~= "table" then error("mcp.skill needs {name = ..., description = ..., read = function(path, ctx)}", 3) end
  if not valid_name(def.name) then
    error(("mcp.skill: name %s: lowercase letters, digits and single hyphens inside, at most 64 characters"):format(
      tostring(def.name)), 3)
  end
  if type(def.description) ~= "string" then error("mcp.skill " .. def.name .. ": description (a string) is required", 3) end
  if type(def.read) ~= "function" then error("mcp.skill " .. def.name .. ": read must be a function(path, ctx)", 3) end
  local fm = {}
  for k, v in pairs(def.frontmatter or {}) do fm[k] = v end
  fm.name, fm.description = def.name, def.description
  local entry = { uri = "skill://" .. def.name .. "/SKILL.md", frontmatter = object(fm), resources = "dynamic",
                  read = def.read }
  if M.by_uri[entry.uri] then error("mcp.skill: a skill named " .. def.name .. " is already served", 3) end
  M.by_uri[entry.uri] = entry
  M.list[#M.list + 1] = entry
  table.sort(M.list, function(a, b) return a.uri < b.uri end)
  serve_template { uriTemplate = "skill://" .. def.name .. "/{+path}", name = def.name, description = def.description,
    read = function(vars, ctx) return def.read(vars.path, ctx) end }
  return entry
end

function M.offered() return #M.list > 0 end

local function wire(entry)
  return object { uri = entry.uri, frontmatter = entry.frontmatter, resources = entry.resources }
end

--- skills/list: every skill, in URI order (entries are never split).
function M.list_result(params)
  local offset = 0
  if params.cursor ~= nil then
    offset = type(params.cursor) == "string" and tonumber(params.cursor:match("^s(%d+)$")) or nil
    if not offset or offset > #M.list then rpc_error(INVALID_PARAMS, "Invalid params: not a cursor of skills/list") end
  end
  local size = core.page_size()
  if size <= 0 then size = #M.list end
  local page = array()
  for i = offset + 1, math.min(offset + size, #M.list) do page[#page + 1] = wire(M.list[i]) end
  local result = { skills = page }
  if offset + size < #M.list then result.nextCursor = "s" .. (offset + size) end
  return result
end

--- skills/get {uri}: one skill's entry, or -32602.
function M.get_result(params)
  local uri = params.uri
  if type(uri) ~= "string" then rpc_error(INVALID_PARAMS, "Invalid params: uri (a skill's SKILL.md URI) is required") end
  local entry = M.by_uri[uri]
  if not entry then rpc_error(INVALID_PARAMS, "No skill is served at " .. uri, { uri = uri }) end
  return { skill = wire(entry) }
end

--- resources/directory/read {uri, cursor?}: a directory's direct children.
function M.directory_result(params)
  local uri = params.uri
  if type(uri) ~= "string" then rpc_error(INVALID_PARAMS, "Invalid params: uri (a directory resource) is required") end
  local children = directories[uri]
  if not children then rpc_error(INVALID_PARAMS, uri .. " is not a directory resource", { uri = uri }) end
  local offset = 0
  if params.cursor ~= nil then
    offset = type(params.cursor) == "string" and tonumber(params.cursor:match("^d(%d+)$")) or nil
    if not offset or offset > #children then rpc_error(INVALID_PARAMS, "Invalid params: not a cursor of this directory") end
  end
  local size = core.page_size()
  if size <= 0 then size = #children end
  local page = array()
  for i = offset + 1, math.min(offset + size, #children) do page[#page + 1] = children[i] end
  local result = { resources = page }
  if offset + size < #children then result.nextCursor = "d" .. (offset + size) end
  return result
end

return M
