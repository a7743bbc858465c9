-- The app's files call each other one way (issue 42): a Lua API that holds
-- child processes, transfers or connections registers how to stop them
-- (app/teardown.h), so the generation (vm.c) and the app (reload.c) stop
-- them without naming the API (loops of calls are the layer check's:
-- runtime/tools/check-layers.sh, runtime/tools/call-loops.txt). Drawn from the built objects' own symbols (nm): what a file uses that
-- another file defines is a call from it to that file.

local client = require "mcp_client"

local OBJ = "build/obj/app"

-- name -> {defines = {symbol = true}, uses = {symbol = true}}
local function read_objects()
  local code, list = client.sh("ls " .. OBJ .. "/*.o")
  assert(code == 0, "no objects in " .. OBJ .. ": run make first")
  local files = {}
  for path in list:gmatch("[^\n]+") do
    local name = path:match("([^/]+)%.o$")
    local f = { defines = {}, uses = {} }
    local _, defined = client.sh("nm -g --defined-only " .. path)
    for symbol in defined:gmatch("%S+ %u (%S+)") do f.defines[symbol] = true end
    local _, undefined = client.sh("nm -u " .. path)
    for symbol in undefined:gmatch("U (%S+)") do f.uses[symbol] = true end
    files[name] = f
  end
  return files
end

-- from -> to -> sorted list of the symbols from uses that to defines
local function calls(files)
  local edges = {}
  for from, f in pairs(files) do
    for to, g in pairs(files) do
      if from ~= to then
        local symbols = {}
        for symbol in pairs(f.uses) do
          if g.defines[symbol] then symbols[#symbols + 1] = symbol end
        end
        if #symbols > 0 then
          table.sort(symbols)
          edges[from] = edges[from] or {}
          edges[from][to] = symbols
        end
      end
    end
  end
  return edges
end

-- The files holding processes, transfers or connections for the scripts.
local function holds_resources(name)
  return name == "lua_exec" or name == "lua_http" or name == "lua_store" or name:match("^lua_remote")
    or name:match("^remote_")
end

describe("the app's files", function()
  local files, edges
  setup(function()
    files = read_objects()
    edges = calls(files)
  end)

  it("are read from the objects (the check sees a call when there is one)", function()
    assert.is_truthy(edges.vm and edges.vm.lua_task, "vm.c starts calls in lua_task.c")
    assert.is_truthy(edges.lua_exec and edges.lua_exec.lua_task, "mcp.exec waits through lua_task.c")
  end)

  it("stop what a Lua API holds without naming the API (the generation and the app run what it registered)", function()
    local named = {}
    for _, from in ipairs { "vm", "reload" } do
      for to, symbols in pairs(edges[from] or {}) do
        if holds_resources(to) then
          for _, symbol in ipairs(symbols) do
            -- Opening a module for the scripts is registering it, not stopping it.
            if not symbol:match("^luaopen_") then named[#named + 1] = from .. ".c -> " .. to .. ".c: " .. symbol end
          end
        end
      end
    end
    table.sort(named)
    assert.are.same({}, named)
  end)

  it("each open with why they exist and stay under 1,500 lines (one concern a file)", function()
    local code, list = client.sh("ls runtime/app/*.c")
    assert.are.equal(0, code)
    local long, silent = {}, {}
    for path in list:gmatch("[^\n]+") do
      local text = client.read_file(path)
      local _, lines = text:gsub("\n", "")
      if lines > 1500 then long[#long + 1] = path .. ": " .. lines .. " lines" end
      if not text:match("^/%*[%s%*]*[%w_]+%.c %- ") then silent[#silent + 1] = path end
    end
    assert.are.same({}, long)
    assert.are.same({}, silent)
  end)
end)
