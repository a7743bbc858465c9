-- How the permission checks read a path on Windows (lua/mcp/path.lua),
-- tested here on any platform: the module is loaded with the Windows rules
-- forced, over a small pretend file system (drives C: and D:, a share,
-- a junction and links that lead out of a granted folder), and asked what
-- permissions.lua asks: resolve the path, then is it within a grant? The
-- binary picks its rules from mcp.core.platform (runtime/os/path_*.c); the
-- native specs (permissions_spec, paths_spec) cover POSIX.

package.path = "lua/?.lua;" .. package.path
local path_rules = require "mcp.path"

-- The pretend file system: what exists (in its real case), and links
-- (junctions and symbolic links) with their stored targets.
local EXISTING = {
  "C:\\", "C:\\Work", "C:\\Data", "C:\\Data\\note.txt", "C:\\Data\\Sub", "C:\\Outside", "C:\\Outside\\secret.txt",
  "C:\\DataX", "C:\\DataX\\file.txt", "C:\\Program Files", "C:\\Program Files\\Git", "C:\\Program Files\\Git\\bin",
  "C:\\Program Files\\Git\\bin\\git.exe",
  "D:\\", "D:\\Data", "D:\\Data\\note.txt", "D:\\Data\\x.txt", "D:\\Data\\other.txt",
  "\\\\server\\share", "\\\\server\\share\\secret.txt", "\\\\server\\share\\docs", "\\\\server\\share\\docs\\a.txt",
  "\\\\server\\other", "\\\\server\\other\\docs", "\\\\server\\other\\docs\\a.txt",
}
local LINKS = {
  ["C:\\Data\\door"] = "\\??\\C:\\Outside",                -- a junction
  ["C:\\Data\\link.txt"] = "C:\\Outside\\secret.txt",      -- a symbolic link
  ["C:\\Data\\dangling"] = "\\??\\C:\\Outside\\new.txt",   -- to a file not there yet
  ["C:\\Data\\rel"] = "..\\Outside",                       -- relative to its folder
  ["C:\\Data\\inside"] = "Sub",                            -- a link that stays inside
  ["C:\\Data\\later"] = "\\??\\C:\\Data\\Sub\\later.txt",     -- to a file not there yet, inside
}

local real_case, link_target = {}, {}
for _, p in ipairs(EXISTING) do real_case[p:lower()] = p end
for p, target in pairs(LINKS) do link_target[p:lower()] = target end

local rules
-- GetFinalPathNameByHandleW's answer, without its \\?\ (as path_windows.c
-- gives it): each name in its real case, links followed.
local function fake_realpath(p, depth)
  depth = depth or 0
  if p == "." then return "C:\\Work" end
  if depth > 8 then return nil end
  local a = rules.absolute(p)
  if not a then return nil end
  local root = a:match("^%a:\\") or a:match("^\\\\[^\\]+\\[^\\]+")
  local current = real_case[root:lower()]
  if not current then return nil end
  for name in a:sub(#root + 1):gmatch("[^\\]+") do
    local next_path = (current:sub(-1) == "\\" and current or current .. "\\") .. name
    local target = link_target[next_path:lower()]
    if target then
      current = fake_realpath(rules.absolute(target, current), depth + 1)
      if not current then return nil end
    else
      current = real_case[next_path:lower()]
      if not current then return nil end
    end
  end
  return current
end

local function fake_readlink(p)
  local a = rules.absolute(p)
  return a and link_target[a:lower()]
end

rules = path_rules.new("windows", { realpath = fake_realpath, readlink = fake_readlink })

-- What permissions.lua's check_path decides, for these grants.
local GRANTS = { "C:\\Data", "\\\\server\\share\\docs", "D:\\Data\\x.txt" }
local granted = {}
for i, g in ipairs(GRANTS) do granted[i] = assert(rules.resolve(g), g) end

local function allowed(path)
  local real = rules.resolve(path)
  if not real then return false end
  for _, dir in ipairs(granted) do
    if rules.within(real, dir) then return true end
  end
  return false
end

local ALLOW, DENY = true, false
local CASES = {
  -- drive letters, both separators, case
  { "C:\\Data\\note.txt", ALLOW },
  { "c:\\data\\note.txt", ALLOW },
  { "C:/Data/note.txt", ALLOW },
  { "c:/DATA/NOTE.TXT", ALLOW },
  { "C:\\Data/Sub\\..//note.txt", ALLOW },
  { "C:\\Data\\.\\note.txt", ALLOW },
  { "C:\\Data", ALLOW },
  { "C:\\Data\\", ALLOW },
  { "c:/data/sub/", ALLOW },
  { "C:\\Data\\new.txt", ALLOW },                 -- to be written: its folder is resolved
  { "C:\\Data\\new\\deeper\\file.txt", ALLOW },
  { "C:\\Data\\inside\\x.txt", ALLOW },           -- a link that stays inside
  { "C:\\Data\\later", ALLOW },
  { "D:\\Data\\x.txt", ALLOW },                   -- a file granted on its own
  { "d:/data/X.TXT", ALLOW },
  -- \\?\ and UNC forms
  { "\\\\?\\C:\\Data\\note.txt", ALLOW },
  { "\\\\?\\c:\\data\\new.txt", ALLOW },
  { "\\??\\C:\\Data\\note.txt", ALLOW },
  { "\\\\server\\share\\docs\\a.txt", ALLOW },
  { "//SERVER/Share/Docs/a.txt", ALLOW },
  { "\\\\?\\UNC\\server\\share\\docs\\a.txt", ALLOW },
  { "\\\\server\\share\\docs\\new\\b.txt", ALLOW },
  -- relative: against the current folder (C:\Work) and its drive
  { "..\\Data\\note.txt", ALLOW },
  { "\\Data\\note.txt", ALLOW },
  { "C:..\\Data\\note.txt", ALLOW },
  { "note.txt", DENY },
  { "E:note.txt", DENY },                           -- E:'s own current folder is not known
  -- Windows strips the last name's trailing dots and spaces
  { "C:\\Data\\note.txt.", ALLOW },
  { "C:\\Data\\note.txt . .", ALLOW },
  { "C:\\Outside\\secret.txt.", DENY },
  -- a folder name ending in a dot or a space is not guessed at
  { "C:\\Data.\\note.txt", DENY },
  { "C:\\Data \\note.txt", DENY },
  { "C:\\Data\\Sub\\...\\note.txt", DENY },
  { "C:\\Data \\", DENY },
  -- .. never leads out
  { "C:\\Outside\\secret.txt", DENY },
  { "C:\\Data\\..\\Outside\\secret.txt", DENY },
  { "c:/data/../outside/secret.txt", DENY },
  { "C:\\Data\\..\\..\\..\\Outside\\secret.txt", DENY },
  { "\\\\?\\C:\\Data\\..\\Outside\\secret.txt", DENY },
  { "\\\\server\\share\\docs\\..\\secret.txt", DENY },
  { "\\\\server\\share\\docs\\..\\..\\other\\docs\\a.txt", DENY }, -- stays on the share
  { "\\\\?\\UNC\\server\\share\\docs\\..\\..\\x", DENY },
  { "C:\\DataX\\file.txt", DENY },                  -- a name that only starts like the grant
  -- links and junctions that lead out
  { "C:\\Data\\door\\secret.txt", DENY, "C:\\Outside\\secret.txt" },
  { "C:\\Data\\link.txt", DENY },
  { "C:\\Data\\dangling", DENY, "C:\\Outside\\new.txt" },
  { "C:\\Data\\rel\\secret.txt", DENY, "C:\\Outside\\secret.txt" },
  -- another drive or share is never inside
  { "D:\\Data\\note.txt", DENY },
  { "D:\\Data\\other.txt", DENY },
  { "\\\\server\\other\\docs\\a.txt", DENY },
  { "\\\\localhost\\C$\\Data\\note.txt", DENY },
  { "\\\\server", DENY },
  { "\\\\?\\GLOBALROOT\\Device\\HarddiskVolume1\\Data\\note.txt", DENY },
  { "\\\\?\\Volume{0b1c2d3e-0000-0000-0000-000000000000}\\Data\\note.txt", DENY },
  -- alternate data streams
  { "C:\\Data\\note.txt:hidden", DENY },
  { "C:\\Data\\note.txt::$DATA", DENY },
  { "C:\\Data:stream", DENY },
  { "C:\\Data\\new.txt:payload:$DATA", DENY },
  -- devices
  { "C:\\Data\\NUL", DENY },
  { "C:\\Data\\nul.txt", DENY },
  { "C:\\Data\\con .txt", DENY },
  { "C:\\Data\\COM1", DENY },
  { "C:\\Data\\lpt9.log", DENY },
  { "C:\\Data\\COM\194\185", DENY },
  { "CONIN$", DENY },
  { "\\\\.\\C:\\Data\\note.txt", DENY },
  { "\\\\.\\pipe\\luamcp", DENY },
  -- what C would cut short at a NUL byte
  { "C:\\Outside\\secret.txt\0\\..\\..\\Data\\note.txt", DENY },
}

describe("paths on Windows (lua/mcp/path.lua, forced)", function()
  it("judges " .. #CASES .. " paths against grants " .. table.concat(GRANTS, ", ") .. " as Windows reads them", function()
    assert.is_true(#CASES >= 40)
    local wrong = {}
    for _, case in ipairs(CASES) do
      local got = allowed(case[1])
      -- Where it matters, denied for the right reason: what was judged.
      if got ~= case[2] or (case[3] and rules.resolve(case[1]) ~= case[3]) then
        wrong[#wrong + 1] = ("%q: %s, expected %s (resolved: %s)"):format(case[1], got and "allowed" or "denied",
          case[2] and "allowed" or "denied", tostring(rules.resolve(case[1])))
      end
    end
    assert.are.same({}, wrong)
  end)

  it("brings every form to one absolute form", function()
    local FORMS = {
      { "C:\\x", "C:\\x" }, { "c:/x", "C:\\x" }, { "C:/X/", "C:\\X" }, { "c:", "C:\\Work" }, { "C:\\", "C:\\" },
      { "C:\\..", "C:\\" }, { "\\\\?\\c:\\a\\b", "C:\\a\\b" }, { "\\\\?\\C:", "C:\\" },
      { "\\\\?\\UNC\\srv\\sh\\a", "\\\\srv\\sh\\a" }, { "//srv/sh/", "\\\\srv\\sh" }, { "\\\\srv\\sh\\..", "\\\\srv\\sh" },
      { "a\\b", "C:\\Work\\a\\b" }, { "\\a", "C:\\a" }, { "secret.txt. ", "C:\\Work\\secret.txt" },
      { "\\\\?\\C:\\keep.txt.", "C:\\keep.txt." }, -- \\?\: Win32 leaves names as they are
    }
    for _, f in ipairs(FORMS) do
      assert.are.equal(f[2], rules.absolute(f[1]), f[1])
    end
    assert.is_nil(rules.absolute("D:x"))
    assert.is_nil(rules.absolute(""))
  end)

  it("compares programs by one key, whatever the case or separators (exec)", function()
    local git = "C:\\Program Files\\Git\\bin\\git.exe"
    assert.are.equal(rules.key(git), rules.key("c:/program files/git/BIN/GIT.EXE"))
    assert.are.equal(rules.key(git), rules.key("\\\\?\\C:\\Program Files\\Git\\bin\\git.exe"))
    assert.are_not.equal(rules.key(git), rules.key("D:\\Program Files\\Git\\bin\\git.exe"))
    assert.is_true(rules.has_separator("bin\\git.exe"))
    assert.is_true(rules.has_separator("bin/git.exe"))
    assert.is_false(rules.has_separator("git"))
  end)

  it("a drive's root holds that drive only", function()
    assert.is_true(rules.within("C:\\Data\\x", "C:\\"))
    assert.is_true(rules.within("c:\\", "C:\\"))
    assert.is_false(rules.within("D:\\Data\\x", "C:\\"))
    assert.is_false(rules.within("\\\\server\\share\\x", "C:\\"))
    assert.is_true(rules.within("\\\\SERVER\\share\\x", "\\\\server\\SHARE"))
    assert.is_false(rules.within("\\\\server\\shared\\x", "\\\\server\\share"))
  end)

  it("names devices, which mcp.fs refuses confined or not", function()
    for _, p in ipairs { "NUL", "nul", "C:\\x\\CON", "con.txt", "aux .log", "COM9", "LPT1", "\\\\.\\PhysicalDrive0",
      "//./pipe/x", "\\\\?\\C:\\x\\nul", "C:\\x\\prn:stream", "\\\\?\\pipe\\x", "\\\\?\\GLOBALROOT\\Device\\Null",
      "\\\\server\\PIPE\\x", "//server/mailslot/x", "\\\\?\\UNC\\server\\pipe\\x" } do
      assert.is_true(rules.is_device(p), p)
    end
    for _, p in ipairs { "C:\\x\\null", "console.txt", "C:\\x\\COM10", "C:\\nullable\\a", "lpt", "\\\\server\\share",
      "\\\\?\\C:\\x", "\\\\?\\UNC\\server\\share\\pipes", "C:\\pipe\\x" } do
      assert.is_false(rules.is_device(p), p)
    end
  end)

  it("reads a client's file:// roots", function()
    assert.are.equal("C:/Users/me/project", rules.from_file_uri("file:///C:/Users/me/project"))
    assert.are.equal("c:/My Files", rules.from_file_uri("file:///c:/My%20Files"))
    assert.are.equal("C:/x", rules.from_file_uri("file://localhost/C:/x"))
    assert.are.equal("\\\\server/share/docs", rules.from_file_uri("file://server/share/docs"))
    assert.are.equal("\\\\server\\share\\docs", rules.absolute(rules.from_file_uri("file://server/share/docs")))
    assert.is_nil(rules.from_file_uri("https://example.com/"))
  end)

  it("expands ~ and finds the temporary folder from Windows' variables", function()
    local env = { USERPROFILE = "C:\\Users\\me", TEMP = "C:\\Users\\me\\AppData\\Local\\Temp" }
    local getenv = function(k) return env[k] end
    assert.are.equal("C:\\Users\\me\\notes", rules.expand_home("~/notes", getenv))
    assert.are.equal("C:\\Users\\me\\notes", rules.expand_home("~\\notes", getenv))
    assert.are.equal("C:\\Users\\me\\AppData\\Local\\Temp", rules.tmp_dir(getenv))
    assert.is_nil(rules.tmpname_probe) -- Lua's os.tmpname only names a file there: the name is checked
  end)

  it("leaves the POSIX rules as they were", function()
    local posix = path_rules.new("posix", { realpath = function(p)
      return (p == "." or p == "/work") and "/work" or nil
    end,
      readlink = function() end })
    assert.are.equal("/work/C:\\x", posix.resolve("C:\\x"))
    assert.is_false(posix.is_device("NUL"))
    assert.is_false(posix.within("/Data/x", "/data"))
    assert.are.equal("/tmp/lua_XXXXXX", posix.tmpname_probe)
    assert.has_error(function() path_rules.new("plan9", {}) end)
  end)
end)
