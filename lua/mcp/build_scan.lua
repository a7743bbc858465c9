-- mcp.build_scan: what `luamcp build` carries besides the modules the
-- scripts loaded while it ran them: the ones a function requires only when
-- it is called (a handler's `local pretty = require "pl.pretty"`). Each
-- file's `require "name"` literals are looked up as require would look them
-- up, in the build's own generation, without running anything: a module
-- that package.path finds is compiled by the recording searcher (vm.c),
-- which is what makes build carry it; a C module that the folder's own
-- scripts name is reported, since a built program could not load it.

local M = {}

-- require "a.b", require("a.b"), require 'a.b', require [[a.b]], and
-- pcall(require, "a.b")
local PATTERNS = {
  "require%s*%(?%s*\"([%w_.-]+)\"",
  "require%s*%(?%s*'([%w_.-]+)'",
  "require%s*%(?%s*%[%[([%w_.-]+)%]%]",
  "require%s*,%s*\"([%w_.-]+)\"",
  "require%s*,%s*'([%w_.-]+)'",
}

local function required_names(text)
  local names = {}
  for _, pattern in ipairs(PATTERNS) do
    for name in text:gmatch(pattern) do
      -- Not the head of a name built at run time: require("pl." .. name).
      if not (name:find("^%.") or name:find("%.$") or name:find("..", 1, true)) then names[#names + 1] = name end
    end
  end
  return names
end

-- The searchers of a generation under luamcp run (vm.c, add_searchers):
-- 1 package.preload, 2 the script folder, 3 the built-in library,
-- 4 package.path (recorded for build); 5 and 6 are Lua's C searchers,
-- never called here (they would load the library).
local FOLDER, PACKAGE_PATH = 2, 4

-- The text's code without its comments, and each string as "": what is
-- left of `mcp.http` inside a string or a comment is no use of it.
local function code_only(text)
  local out, i, n = {}, 1, #text
  while i <= n do
    local s = text:find("[-\"'%[]", i)
    if not s then
      out[#out + 1] = text:sub(i)
      break
    end
    out[#out + 1] = text:sub(i, s - 1)
    local c = text:sub(s, s)
    local long = text:match("^%[(=*)%[", s)
    if c == "-" and text:sub(s + 1, s + 1) == "-" then
      local level = text:match("^%-%-%[(=*)%[", s)
      local close = level and select(2, text:find("]" .. level .. "]", s, true)) or text:find("\n", s, true)
      i = (close or n) + 1
      out[#out + 1] = " "
    elseif long then
      local close = select(2, text:find("]" .. long .. "]", s, true))
      i = (close or n) + 1
      out[#out + 1] = '""'
    elseif c == '"' or c == "'" then
      local j = s + 1
      while j <= n do
        local d = text:sub(j, j)
        if d == "\\" then j = j + 2
        elseif d == c or d == "\n" then break
        else j = j + 1 end
      end
      i = j + 1
      out[#out + 1] = '""'
    else
      out[#out + 1] = c
      i = s + 1
    end
  end
  return table.concat(out)
end

--- The fields of the library a file's code names, as "mcp.http": `mcp.X`
--- and `M.X` where `local M = require "mcp"`, outside comments and strings.
--- A lexical look, which cannot see through other aliases (`local h =
--- mcp; h.http`), mcp["http"] or names built at run time, and counts a use
--- in code that never runs: what `luamcp build` warns about, no more.
function M.library_uses(text, into)
  local names = { mcp = true }
  for alias in text:gmatch("local%s+([%a_][%w_]*)%s*=%s*require%s*%(?%s*[\"']mcp[\"']") do names[alias] = true end
  local code = code_only(text)
  for at, name, field in code:gmatch("()([%a_][%w_]*)%s*%.%s*([%a_][%w_]*)") do
    -- Not a field of something else: t.mcp.http
    if names[name] and not code:sub(at - 1, at - 1):find("[.:]") then into["mcp." .. field] = true end
  end
  return into
end

--- Scan own (the folder's Lua files that ran) and deps (the files of the
--- modules package.path gave), and the files of every module they name,
--- in turn; read(file) returns a file's text or nil. Returns "module
--- (file)" for each C module the folder's own files name, and the sorted
--- library fields all those files use (M.library_uses).
function M.scan(own, deps, read)
  local queue, queued, from_path = {}, {}, {}
  local function add(file, is_dep)
    if queued[file] then return end
    queued[file] = true
    from_path[file] = is_dep
    queue[#queue + 1] = file
  end
  for _, file in ipairs(own) do add(file, false) end
  for _, file in ipairs(deps) do add(file, true) end
  local looked, c_modules, uses = {}, {}, {}
  local i = 1
  while i <= #queue do
    local file = queue[i]
    i = i + 1
    local text = read(file) or ""
    M.library_uses(text, uses)
    for _, name in ipairs(required_names(text)) do
      if not looked[name] and package.loaded[name] == nil then
        looked[name] = true
        local found_by, where
        for k = 1, PACKAGE_PATH do
          -- A module that does not compile is left to fail where it is required.
          local ok, loader, extra = pcall(package.searchers[k], name)
          if ok and type(loader) == "function" then
            found_by, where = k, extra
            break
          end
        end
        if (found_by == FOLDER or found_by == PACKAGE_PATH) and type(where) == "string" then
          add(where, found_by == PACKAGE_PATH)
        elseif not found_by and not from_path[file] then
          local library = package.searchpath(name, package.cpath)
          if library then c_modules[#c_modules + 1] = ("%s (%s, named in %s)"):format(name, library, file) end
        end
      end
    end
  end
  local used = {}
  for name in pairs(uses) do used[#used + 1] = name end
  table.sort(used)
  return c_modules, used
end

return M
