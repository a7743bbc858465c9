-- lua/meta/mcp.lua, the LuaLS definitions of the Lua API, against the API
-- the binary really has. A fixture (spec/fixtures/meta) walks the mcp table
-- and the objects it hands out inside a running luamcp and returns their
-- names; the definitions must declare each of them, with annotations, and
-- declare nothing else, so they cannot drift from the code. No LuaLS runs
-- here (neither Debian nor npm packages it): the last checks stand in for
-- what its diagnostics would catch in this file.

local client = require "mcp_client"

local META = "lua/meta/mcp.lua"

-- The names the binary has: {functions, tables, values, meta_embedded}.
local function runtime_api()
  local server = client.spawn { "run", "spec/fixtures/meta" }
  server:initialize()
  local result = server:call_tool("public_api", {})
  server:close()
  assert(result.structuredContent, "public_api returned no structuredContent: " .. client.json.encode(result)
    .. "\n" .. server.stderr)
  return result.structuredContent
end

local function split_params(list)
  local params = {}
  for p in list:gmatch("[^,]+") do params[#params + 1] = p:match("^%s*(.-)%s*$") end
  return params
end

-- What the definitions declare. Each declaration comes with the block of
-- `---` lines right above it. Methods are declared on a local that the
-- `---@class` above it names (`---@class mcp.Context` / `local Context = {}`),
-- and are reported under the class's name, as the fixture reports them.
local function parse_meta(text)
  local meta = { functions = {}, assigned = {}, types = {}, annotation_lines = {}, first_line = nil }
  local classes = {} -- local variable -> class name
  local block = {}
  local n = 0
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    meta.first_line = meta.first_line or line
    if line:match("^%-%-%-") then
      block[#block + 1] = line
      if line:match("^%-%-%-@") then meta.annotation_lines[#meta.annotation_lines + 1] = { line = n, text = line } end
      local defined = line:match("^%-%-%-@class%s+([%w_%.]+)") or line:match("^%-%-%-@alias%s+([%w_%.]+)")
      if defined then meta.types[defined] = true end
    else
      local var = line:match("^local%s+([%w_]+)%s*=%s*{}")
      if var then
        for i = #block, 1, -1 do
          local class = block[i]:match("^%-%-%-@class%s+([%w_%.]+)")
          if class then
            classes[var] = class
            break
          end
        end
      end
      local owner, rest, params = line:match("^function%s+([%w_]+)([%w_%.:]*)%s*%((.-)%)")
      if owner then
        local name = (classes[owner] or owner) .. rest
        meta.functions[name] = { line = n, params = split_params(params), block = block, owner_known = classes[owner] ~= nil }
      end
      local path = line:match("^([%w_]+[%w_%.]*)%s*=[^=]")
      if path then
        local head, tail = path:match("^([%w_]+)(.*)$")
        if classes[head] then meta.assigned[classes[head] .. tail] = n end
      end
      block = {}
    end
  end
  return meta
end

-- A description line, or a ---@param or ---@return: what editors show.
local function annotated(block)
  for _, line in ipairs(block) do
    if line:match("^%-%-%-%s*[^@%s]") or line:match("^%-%-%-@param%s") or line:match("^%-%-%-@return%s") then
      return true
    end
  end
  return false
end

local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys)
  return keys
end

local function problem_list(title, names)
  return ("%s (%d):\n  %s"):format(title, #names, table.concat(names, "\n  "))
end

describe("the LuaLS definitions (lua/meta/mcp.lua)", function()
  local api, meta

  setup(function()
    api = runtime_api()
    meta = parse_meta(client.read_file(META))
  end)

  it("are a ---@meta file for require \"mcp\" that loads as Lua", function()
    assert.are.equal("---@meta mcp", meta.first_line)
    assert(loadfile(META))
  end)

  it("see the whole API in the binary (the walk found it)", function()
    -- Guards the checks below against passing on an empty walk.
    local have = {}
    for _, name in ipairs(api.functions) do have[name] = true end
    for _, name in ipairs { "mcp.tool", "mcp.fs.read", "mcp.http.request", "mcp.json.encode", "mcp.bundle.read",
      "mcp.Context:log", "mcp.Context:sample", "mcp.Task:wait", "mcp.Handle:remove", "mcp.http.Response:json" } do
      assert.is_true(have[name], name .. " was not found in the binary")
    end
  end)

  it("declare every public function, with annotations", function()
    local missing, bare = {}, {}
    for _, name in ipairs(api.functions) do
      local declared = meta.functions[name]
      if not declared then
        missing[#missing + 1] = name
      elseif not annotated(declared.block) then
        bare[#bare + 1] = ("%s (%s:%d)"):format(name, META, declared.line)
      end
    end
    local problems = {}
    if #missing > 0 then problems[#problems + 1] = problem_list("public functions with no declaration in " .. META, missing) end
    if #bare > 0 then
      problems[#problems + 1] = problem_list("declarations with no description, ---@param or ---@return above them", bare)
    end
    assert(#problems == 0, table.concat(problems, "\n"))
  end)

  it("declare every public table and value of mcp", function()
    local missing = {}
    for _, list in ipairs { api.tables, api.values } do
      for _, name in ipairs(list) do
        if not meta.assigned[name] then missing[#missing + 1] = name end
      end
    end
    table.sort(missing)
    assert(#missing == 0, problem_list("public tables and values with no `name = ...` in " .. META, missing))
  end)

  it("declare nothing the binary does not have", function()
    local exists = {}
    for _, list in ipairs { api.functions, api.tables, api.values } do
      for _, name in ipairs(list) do exists[name] = true end
    end
    local stale = {}
    for _, name in ipairs(sorted_keys(meta.functions)) do
      if not exists[name] then stale[#stale + 1] = ("%s (%s:%d)"):format(name, META, meta.functions[name].line) end
    end
    for _, name in ipairs(sorted_keys(meta.assigned)) do
      if not exists[name] then stale[#stale + 1] = ("%s (%s:%d)"):format(name, META, meta.assigned[name]) end
    end
    assert(#stale == 0, problem_list("declared but not in the binary", stale))
  end)

  it("are not embedded in the binary", function()
    assert.is_false(api.meta_embedded, "require \"meta.mcp\" works in the binary: the Makefile embeds lua/meta/")
  end)

  it("give each parameter a ---@param and no ---@param to a parameter that is not there", function()
    local problems = {}
    for _, name in ipairs(sorted_keys(meta.functions)) do
      local f = meta.functions[name]
      local documented = {}
      for _, line in ipairs(f.block) do
        local param = line:match("^%-%-%-@param%s+(%S+)")
        if param then documented[(param:gsub("%?$", ""))] = true end
      end
      local declared = {}
      for _, p in ipairs(f.params) do
        declared[p] = true
        if not documented[p] then problems[#problems + 1] = ("%s: %s has no ---@param (line %d)"):format(name, p, f.line) end
      end
      for _, p in ipairs(sorted_keys(documented)) do
        if not declared[p] then
          problems[#problems + 1] = ("%s: ---@param %s is not a parameter (line %d)"):format(name, p, f.line)
        end
      end
    end
    assert(#problems == 0, problem_list("parameters and their annotations disagree", problems))
  end)

  it("define every type they name", function()
    -- The check LuaLS's undefined-doc-name makes: types are the names with
    -- a capitalised last part (mcp.Context, mcp.http.Response); lower-case
    -- ones in descriptions are functions (mcp.text).
    local undefined = {}
    for _, a in ipairs(meta.annotation_lines) do
      for name in a.text:gmatch("mcp[%w_]*%.[%w_%.]*") do
        name = name:gsub("%.$", "")
        local last = name:match("([%w_]+)$")
        if last:match("^%u") and not meta.types[name] then
          undefined[#undefined + 1] = ("%s (line %d)"):format(name, a.line)
        end
      end
    end
    assert(#undefined == 0, problem_list("types named but not defined by ---@class or ---@alias", undefined))
  end)
end)
