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

--- Scan own (the folder's Lua files that ran) and deps (the files of the
--- modules package.path gave), and the files of every module they name,
--- in turn; read(file) returns a file's text or nil. Returns "module
--- (file)" for each C module the folder's own files name.
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
  local looked, c_modules = {}, {}
  local i = 1
  while i <= #queue do
    local file = queue[i]
    i = i + 1
    for _, name in ipairs(required_names(read(file) or "")) do
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
  return c_modules
end

return M
