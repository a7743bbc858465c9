-- The README's quick start is true: every command in its shell blocks
-- runs, in a scratch folder with a scratch HOME (so `luamcp install`
-- touches nothing real), and what a comment says a command prints, it
-- prints. `make` is left out: make test has just run it.

local client = require "mcp_client"

local sh = client.sh
local ROOT = io.popen("pwd"):read("l")

local function quick_start_commands()
  local readme = client.read_file("README.md")
  local section = readme:match("\n## Quick start\n(.-)\n## ")
  assert.truthy(section, "README.md has no Quick start section")
  local commands = {}
  for block in section:gmatch("```sh\n(.-)```") do
    for line in block:gmatch("[^\n]+") do
      local command, comment = line:match("^(.-)%s*#%s*(.*)$")
      command = command or line
      if command ~= "" and command ~= "make" and not command:match("^make%s") then
        commands[#commands + 1] = { command = command, prints = comment and comment:match('prints "([^"]+)"') }
      end
    end
  end
  return commands
end

-- This PATH without the folders that hold a luamcp: the quick start is
-- for a machine where luamcp is not installed yet.
local function path_without_luamcp()
  local kept = {}
  for folder in (os.getenv("PATH") or "/usr/bin:/bin"):gmatch("[^:]+") do
    local f = io.open(folder .. "/luamcp")
    if f then f:close() else kept[#kept + 1] = folder end
  end
  return table.concat(kept, ":")
end

describe("the README's quick start", function()
  it("runs as written, with no luamcp on PATH", function()
    local commands = quick_start_commands()
    assert.is_true(#commands >= 3)
    local path = path_without_luamcp()
    assert.are_not.equal(0, (sh(("PATH=%q command -v luamcp"):format(path))))
    local dir = client.temp_dir()
    -- The commands name build/luamcp and scripts/ from the top of the tree.
    assert(os.execute(("ln -s %q %q && ln -s %q %q"):format(ROOT .. "/build", dir .. "/build", ROOT .. "/scripts",
      dir .. "/scripts")))
    for _, c in ipairs(commands) do
      local code, out, err = sh(("cd %q && export HOME=%q PATH=%q && %s </dev/null"):format(dir, dir, path, c.command))
      assert.are.equal(0, code, c.command .. "\n" .. out .. err)
      if c.prints then assert.truthy(out:find(c.prints, 1, true), c.command .. " printed:\n" .. out) end
    end
    client.remove_tree(dir)
  end)
end)
