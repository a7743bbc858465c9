-- The README and the guides in docs/ are true where they can be checked
-- (issue #42, item 5): every block they mark runnable is run, by this spec
-- or by the spec that names it; every relative link leads to a file and
-- heading that exist; no measured figure is quoted that a spec does not
-- check. The marking is spec/helpers/guides.lua's.

local client = require "mcp_client"
local guides = require "guides"

local sh = client.sh
local ROOT = io.popen("pwd"):read("l")
local LUAMCP = client.LUAMCP:sub(1, 1) == "/" and client.LUAMCP or (ROOT .. "/" .. client.LUAMCP)

local function quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- A block's commands: one a line, a line ending in a backslash joined to the
-- next; `# prints "TEXT"` in a line's comment is what its output must hold.
local function commands(text)
  local list, pending = {}, ""
  for line in text:gmatch("[^\n]+") do
    line = pending .. line
    if line:match("\\$") then
      pending = line:sub(1, -2) .. " "
    else
      pending = ""
      local command, comment = line:match("^(.-)%s+#%s(.*)$")
      command = command or line
      if command ~= "" and not command:match("^#") then
        list[#list + 1] = { command = command, prints = comment and comment:match('prints "([^"]+)"') }
      end
    end
  end
  return list
end

describe("the guides' runnable blocks", function()
  it("run as written, one line at a time, in a scratch folder with luamcp on PATH", function()
    local ran = 0
    for _, file in ipairs(guides.files()) do
      for _, block in ipairs(guides.code_blocks(file)) do
        if block.mark == "" then
          local dir = client.temp_dir()
          -- The commands name build/ and scripts/ from the top of the tree.
          assert(os.execute(("ln -s %q %q && ln -s %q %q && mkdir %q && ln -s %q %q"):format(ROOT .. "/build",
            dir .. "/build", ROOT .. "/scripts", dir .. "/scripts", dir .. "/bin", LUAMCP, dir .. "/bin/luamcp")))
          local path = dir .. "/bin:" .. (os.getenv("PATH") or "/usr/bin:/bin")
          local where = ("%s:%d"):format(file, block.line)
          local list = commands(block.text)
          assert.is_true(#list > 0, where .. ": a runnable block with no command")
          for _, c in ipairs(list) do
            local code, out, err = sh(("cd %s && export HOME=%s PATH=%s && %s </dev/null"):format(quote(dir),
              quote(dir), quote(path), c.command))
            assert.are.equal(0, code, where .. ": " .. c.command .. "\n" .. out .. err)
            if c.prints then
              assert.truthy(out:find(c.prints, 1, true), where .. ": " .. c.command .. " printed:\n" .. out)
            end
            ran = ran + 1
          end
          client.remove_tree(dir)
        end
      end
    end
    assert.is_true(ran >= 10, "only " .. ran .. " commands are marked runnable")
  end)

  it("sit under their mark, and every block marked with a name is run by the spec that names it", function()
    local specs = {}
    local ls = assert(io.popen("ls spec/*_spec.lua"))
    for path in ls:lines() do specs[#specs + 1] = { path = path, text = guides.read(path) } end
    ls:close()
    local named = 0
    for _, file in ipairs(guides.files()) do
      local marked = {}
      for _, block in ipairs(guides.code_blocks(file)) do
        if block.mark then marked[#marked + 1] = block end
      end
      -- a mark not directly above a fence marks nothing
      assert.are.equal(#guides.marks(file), #marked, file .. ": a <!-- runnable --> mark is not above a code block")
      for _, block in ipairs(marked) do
        if block.mark ~= "" then
          named = named + 1
          local call = ('guides.blocks("%s", "%s")'):format(file, block.mark)
          local by
          for _, spec in ipairs(specs) do
            if spec.text:find(call, 1, true) then by = spec.path end
          end
          assert.truthy(by, ("%s:%d: marked %q, but no spec calls %s"):format(file, block.line, block.mark, call))
        end
      end
    end
    assert.is_true(named >= 3, "only " .. named .. " named blocks")
  end)
end)

describe("the guides' links", function()
  it("lead to a file that exists, and to a heading in it", function()
    local broken, checked = {}, 0
    for _, file in ipairs(guides.files()) do
      local folder = file:match("^(.*)/") or "."
      local fence = false
      local n = 0
      for line in (guides.read(file) .. "\n"):gmatch("([^\n]*)\n") do
        n = n + 1
        if line:match("^```") then fence = not fence end
        -- inline code is not a link
        local prose = not fence and line:gsub("`[^`]*`", "``") or ""
        for target in prose:gmatch("%]%(([^)%s]+)%)") do
          if not target:match("^%a[%w+.-]*:") then
            checked = checked + 1
            local path, anchor = target:match("^([^#]*)#?(.*)$")
            local resolved = path == "" and file or (folder .. "/" .. path)
            local f = io.open(resolved)
            if not f then
              broken[#broken + 1] = ("%s:%d: %s: no such file"):format(file, n, target)
            else
              f:close()
              if anchor ~= "" and not guides.anchors(resolved)[anchor] then
                broken[#broken + 1] = ("%s:%d: %s: no such heading"):format(file, n, target)
              end
            end
          end
        end
      end
    end
    assert.are.same({}, broken)
    assert.is_true(checked >= 20, "only " .. checked .. " links")
  end)
end)

-- Figures measured once go stale with the next feature (issue #41, item
-- 12: "about 6.7 MB" when the program had grown to 8.6): the README and
-- the guides quote a measured size or duration only where a spec checks
-- it, in words that spec checks ("less than half its size":
-- spec/build_spec.lua). Limits are round numbers in KiB and MiB; a size in
-- MB, or a fraction of a KiB or MiB, is a measurement; so is how long a
-- run takes ("about 16 minutes") and a speed.
describe("the guides' figures", function()
  it("quote no measured size of a program, a bundle or memory, nor how long a run takes", function()
    local patterns = { "%d[%d.]* MB%f[%W]", "%d+%.%d+ [KM]iB", "%d+%% of its size", "about %d+ minutes?",
      "about an? %a*%s?minute", "about an hour", "%d+ with a warm cache", "%d[%d,.]* req/s", "%d[%d,.]* calls/s" }
    local found = {}
    for _, file in ipairs(guides.files()) do
      local n = 0
      for line in (guides.read(file) .. "\n"):gmatch("([^\n]*)\n") do
        n = n + 1
        for _, pattern in ipairs(patterns) do
          for figure in line:gmatch(pattern) do found[#found + 1] = ("%s:%d: %s"):format(file, n, figure) end
        end
      end
    end
    assert.are.same({}, found)
  end)
end)
