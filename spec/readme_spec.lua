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

-- What the README says about the command line and the test client is what
-- the program does (issue #30, item 9).
describe("the README's reference", function()
  local readme = client.read_file("README.md")
  local LUAMCP = client.LUAMCP

  -- The options of `luamcp --help` under a heading ("Options:", ...), by heading.
  local function help_options()
    local _, help = sh(LUAMCP .. " --help")
    local sections, current = {}, nil
    for line in help:gmatch("[^\n]*") do
      if line:match("^%S.*:") then
        current = line
        sections[current] = sections[current] or {}
      elseif current then
        local option = line:match("^  (%-%-%l[%l%-]*)")
        if option then table.insert(sections[current], option) end
      end
    end
    return sections
  end

  it("has every option luamcp --help lists, and the general ones in the command table", function()
    local section = readme:match("\n## Command line\n(.-)\n## ")
    local command_table = section and section:match("```\n(.-)```")
    assert.truthy(command_table, "README.md has no command table under ## Command line")
    local sections = help_options()
    assert.truthy(sections["Options:"] and #sections["Options:"] >= 8, "luamcp --help has no Options: section")
    for heading, options in pairs(sections) do
      for _, option in ipairs(options) do
        assert.truthy(readme:find(option, 1, true), option .. " (" .. heading .. ") is not in README.md")
      end
    end
    for _, option in ipairs(sections["Options:"]) do
      assert.truthy(command_table:find(option, 1, true), option .. " is not in the README's command table")
    end
    assert.truthy(command_table:find("--max-tasks N", 1, true))
  end)

  it("names the option that lists busted's options, and it works", function()
    assert.truthy(readme:find("luamcp test --help-busted", 1, true))
    local code, out, err = sh(LUAMCP .. " test --help-busted")
    assert.are.equal(0, code, err)
    assert.truthy(out:find("^Usage: luamcp test "), out)
    assert.truthy(out:find("--pattern", 1, true), out)
    assert.are.equal("", err)
  end)

  it("documents testing.null, testing.json, mcp.rpc_error, mcp.tool_error, mask_errors and args", function()
    for _, name in ipairs { "testing.null", "testing.json", "mcp.rpc_error(", "mcp.tool_error(", "mask_errors",
                            "mcp.arg(", "mcp.enum", "t:list(\"tools\")" } do
      assert.truthy(readme:find(name, 1, true), name .. " is not in README.md")
    end
    -- structuredContent is an object: a list returned has none, and the README says so
    assert.truthy(readme:find("| a list (keys exactly `1..n`", 1, true))
  end)

  it("is right that t:tools() is a map by name and t:list(\"tools\") the list", function()
    assert.truthy(readme:find("as a map by name", 1, true))
    local dir = client.temp_dir()
    assert(os.execute("mkdir " .. dir .. "/spec"))
    client.write_file(dir .. "/server.lua", 'local mcp = require "mcp"\n'
      .. 'mcp.tool { name = "add", args = { a = "integer", b = "integer" }, handler = function(x) return x.a + x.b end }\n'
      .. 'mcp.tool { name = "nothing", handler = function() return { none = mcp.null, list = {1, 2} } end }\n')
    client.write_file(dir .. "/spec/readme_spec.lua", [[
local testing = require "mcp.testing"
describe("the README", function()
  it("is right", function()
    local t = testing.server(".")
    local tools = t:tools()
    assert.equal(0, #tools)
    assert.equal("integer", tools.add.inputSchema.properties.a.type)
    assert.equal("add", t:list("tools")[1].name)
    local r = t:call("nothing")
    assert.equal(testing.null, r.structuredContent.none)
    assert.same({ 1, 2 }, testing.json.decode(testing.json.encode(r.structuredContent.list)))
    assert.equal("3", testing.text(t:call("add", { a = 1, b = 2 })))
    t:close()
  end)
end)
]])
    local program = LUAMCP:sub(1, 1) == "/" and LUAMCP or (ROOT .. "/" .. LUAMCP)
    local code, out, err = sh(("cd %q && %s test"):format(dir, program))
    client.remove_tree(dir)
    assert.are.equal(0, code, out .. err)
    assert.truthy(out:find("1 success / 0 failures", 1, true), out)
  end)
end)

-- The README's OAuth recipe (## Authorization, "A working setup with a
-- real authorization server") runs as written in one shell, the
-- authorization server in the background (issue #41, item 9). Its fixed
-- ports and key folder become ones of this run; `make test-tools` is
-- left out (make test has just installed the tools) but must exist.
describe("the README's OAuth recipe", function()
  local services = require "services"

  local function recipe()
    local readme = client.read_file("README.md")
    local section = readme:match("\n%*%*A working setup with a real authorization server%.%*%*(.-)\n%*%*")
    assert.truthy(section, "README.md has no \"A working setup with a real authorization server\"")
    local blocks = {}
    for block in section:gmatch("```sh\n(.-)```") do blocks[#blocks + 1] = block end
    assert.are.equal(2, #blocks, section)
    return table.concat(blocks)
  end

  it("works from a fresh clone's tools, the authorization server in the background", function()
    local text = recipe()
    assert.truthy(text:find("^make test%-tools "), text)
    local code, out = sh("make -n test-tools")
    assert.are.equal(0, code, out)
    assert.truthy(out:find("npm ci", 1, true), out)
    assert.truthy(text:find("spec/node_modules/", 1, true))
    local dir = client.temp_dir()
    local as_port, mcp_port = services.free_port(), services.free_port()
    text = text:gsub("/tmp/as%-keys", dir .. "/as-keys"):gsub("9400", tostring(as_port)):gsub("8080", tostring(mcp_port))
    -- What a person does by reading the output before the next command:
    -- wait for a server started in the background to listen.
    local lines = {
      "trap 'kill $(jobs -p) 2>/dev/null; wait' EXIT",
      "wait_port() { for _ in $(seq 1200); do (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null && return 0; sleep 0.1; done; "
        .. "echo \"nothing listens on $1\"; exit 1; }",
    }
    for line in text:gmatch("[^\n]+") do
      if not line:match("^make ") then
        lines[#lines + 1] = line
        if line:match("&%s*$") then
          local port = line:match('"port":(%d+)') or line:match("%-%-http [%d.:]-(%d+)%s")
          assert.truthy(port, "no port in " .. line)
          lines[#lines + 1] = "wait_port " .. port
        end
      end
    end
    client.write_file(dir .. "/recipe.sh", table.concat(lines, "\n") .. "\n")
    local out, err
    code, out, err = sh(("bash %q"):format(dir .. "/recipe.sh"))
    client.remove_tree(dir)
    assert.are.equal(0, code, out .. err)
    -- the 401 that starts a client's discovery, the metadata naming the
    -- authorization server, and the call with the token it issued
    assert.truthy(out:find("HTTP/1.1 401", 1, true), out .. err)
    assert.truthy(out:lower():find("www-authenticate: bearer resource_metadata=", 1, true), out .. err)
    assert.truthy(out:find(('"authorization_servers":["http://127.0.0.1:%d"]'):format(as_port), 1, true), out .. err)
    assert.truthy(out:find('"text":"5"', 1, true), out .. err)
  end)
end)

-- Sizes measured once go stale with the next feature (issue #41, item 12:
-- "about 6.7 MB" when the program had grown to 8.6): the README quotes a
-- measured size only where a spec checks it, in words that spec checks
-- ("less than half its size": spec/build_spec.lua). Limits are round
-- numbers in KiB and MiB; a size in MB, or a fraction of a KiB or MiB,
-- is a measurement.
describe("the README's figures", function()
  it("quote no measured size of a program, a bundle or memory", function()
    local readme = client.read_file("README.md")
    local found = {}
    local n = 0
    for line in readme:gmatch("([^\n]*)\n?") do
      n = n + 1
      for _, pattern in ipairs { "%d[%d.]* MB%f[%W]", "%d+%.%d+ [KM]iB", "%d+%% of its size" } do
        for figure in line:gmatch(pattern) do found[#found + 1] = ("README.md:%d: %s"):format(n, figure) end
      end
    end
    assert.are.same({}, found)
  end)
end)
