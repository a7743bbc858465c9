-- mcp.path: how the running platform reads a path, in one place. Every
-- path decision of the library (the permission checks for files, programs
-- and roots, mcp.fs's refusal of devices) goes through the rules made here.
--
--   local rules = require("mcp.path").new(core.platform, core)
--   rules.resolve("./data/x.txt", base)   -- absolute, links and .. resolved
--   rules.within(path, dir)                -- is path dir or under it?
--
-- The platform comes from the binary (mcp.core.platform, set by
-- runtime/os/path_*.c); the rules of either platform can be made on any, so
-- spec/paths_windows_spec.lua tests the Windows ones on Linux. sys gives the
-- file system: realpath(path) -> the real path or nil, readlink(path) -> a
-- link's target or nil.
--
-- POSIX: what the library has always done. Windows: a path is read as the
-- Win32 API would read it, and anything that API reads in a way a plain
-- comparison could misjudge is refused (nil) rather than guessed:
--   * "/" and "\" both separate; C:\x, c:/x and C:/X are the same place
--     (names compare case-insensitively, folding ASCII letters only: two
--     names that differ only in a non-ASCII letter's case are different
--     here, so the mistake can only refuse, never allow);
--   * \\server\share\... (UNC), \\?\C:\..., \\?\UNC\server\share\... are
--     brought to one form; \\.\ (devices), \\?\GLOBALROOT, \\?\Volume{...}
--     are refused; a path on another drive or share is never inside;
--   * "." and ".." are resolved before anything else, as Win32 does (never
--     above the drive's root or the share);
--   * the last name loses its trailing dots and spaces (Windows strips
--     them: "secret.txt." is "secret.txt"); a folder name that ends in one
--     is refused (Win32 strips a dot there but keeps a space);
--   * a ":" after the drive (an alternate data stream, "file:stream" or
--     "file::$DATA"), a NUL byte, and a DOS device name in any part (CON,
--     PRN, AUX, NUL, COM0-9, LPT0-9, CONIN$, CONOUT$, with any extension:
--     "nul.txt" is NUL) are refused;
--   * a relative path is resolved against the process's current folder,
--     "\x" against its drive, and "C:x" only when C: is that drive.

local M = {}

---------------------------------------------------------------------------
-- POSIX
---------------------------------------------------------------------------

local function posix(sys)
  local P = { platform = "posix", separator = "/" }

  function P.is_absolute(path) return path:sub(1, 1) == "/" end
  function P.has_separator(name) return name:find("/", 1, true) ~= nil end
  function P.is_device() return false end
  function P.key(path) return path end

  -- The absolute path with symlinks and .. resolved; for a path that does
  -- not exist (a file about to be written) its nearest existing folder is
  -- resolved and the rest kept; a dangling symbolic link is followed to
  -- where it points (writing through it would create the file there).
  function P.resolve(path, base, depth)
    depth = depth or 0
    if depth > 40 then return nil end -- a loop of links
    if path:sub(1, 1) ~= "/" then path = (base or sys.realpath(".") or "/") .. "/" .. path end
    local real = sys.realpath(path)
    if real then return real end
    local parent, name = path:match("^(.*)/([^/]+)/*$")
    if not parent or name == "." or name == ".." then return nil end
    parent = parent == "" and "/" or parent
    local target = sys.readlink(path)
    if target then return P.resolve(target, parent, depth + 1) end
    local p = P.resolve(parent, nil, depth + 1)
    return p and (p == "/" and ("/" .. name) or (p .. "/" .. name))
  end

  function P.within(path, dir)
    return path == dir or dir == "/" or path:sub(1, #dir + 1) == dir .. "/"
  end

  -- A file:// URI's path (percent-decoded), not yet resolved.
  function P.from_file_uri(uri)
    local p = type(uri) == "string" and uri:match("^file://[^/]*(/.*)$")
    if not p then return nil end
    return (p:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end))
  end

  function P.tmp_dir(getenv)
    local t = getenv("TMPDIR")
    return (t and t ~= "") and t or "/tmp"
  end

  -- "~/x" -> $HOME/x; anything else as it is.
  function P.expand_home(entry, getenv)
    return (entry:gsub("^~/", (getenv("HOME") or "") .. "/"))
  end

  -- mcp.paths: the XDG base directories (a variable that is set to an
  -- absolute path, else its default under HOME); nil where HOME is unset.
  function P.user_folders(getenv)
    local home = getenv("HOME")
    if home == "" or not (home and P.is_absolute(home)) then home = nil end
    local function xdg(name, default)
      local v = getenv(name)
      if v and P.is_absolute(v) then return v end
      return home and (home .. default)
    end
    return { home = home, config = xdg("XDG_CONFIG_HOME", "/.config"), data = xdg("XDG_DATA_HOME", "/.local/share"),
             cache = xdg("XDG_CACHE_HOME", "/.cache"), temp = P.tmp_dir(getenv) }
  end

  -- What os.tmpname's check judges: Lua makes the file with mkstemp in
  -- /tmp, whatever TMPDIR says, so the check must come first.
  P.tmpname_probe = "/tmp/lua_XXXXXX"

  return P
end

---------------------------------------------------------------------------
-- Windows
---------------------------------------------------------------------------

-- Windows compares names folding ASCII letters only. string.lower and
-- upper, and the %a class, would follow the C locale, which a script can
-- change (os.setlocale): these do not.
local LOWER, UPPER = {}, {}
for c = ("A"):byte(), ("Z"):byte() do
  LOWER[string.char(c)], UPPER[string.char(c + 32)] = string.char(c + 32), string.char(c)
end
local function fold(s) return (s:gsub("[A-Z]", LOWER)) end
local function upper(s) return (s:gsub("[a-z]", UPPER)) end

-- DOS device names, which Win32 opens as devices in any folder and with
-- any extension ("C:\data\nul.txt" is NUL). The superscript digits are
-- UTF-8 (COM¹ is a device too).
local DEVICES = { con = true, prn = true, aux = true, nul = true, ["conin$"] = true, ["conout$"] = true }
for _, d in ipairs { "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "\194\185", "\194\178", "\194\179" } do
  DEVICES["com" .. d], DEVICES["lpt" .. d] = true, true
end

local function is_device_name(name)
  local stem = name:match("^[^.]*"):gsub("[ ]+$", "")
  return DEVICES[fold(stem)] == true
end

local function windows(sys)
  local P = { platform = "windows", separator = "\\" }

  local function is_sep(c) return c == "/" or c == "\\" end

  function P.is_absolute(path)
    return path:match("^[A-Za-z]:[/\\]") ~= nil or (is_sep(path:sub(1, 1)) and is_sep(path:sub(2, 2)))
  end
  function P.has_separator(name) return name:find("[/\\]") ~= nil end

  -- Split "C:\a\b" style text (already with "\" only) after its root into
  -- names, resolving "." and ".."; the last name is trimmed as Win32 trims
  -- it, unless verbatim (\\?\: Win32 leaves those names alone). nil, why
  -- for what cannot be judged.
  local function names_of(rest, verbatim)
    local out = {}
    local parts = {}
    for part in rest:gmatch("[^\\]+") do parts[#parts + 1] = part end
    local trailing_separator = rest:sub(-1) == "\\"
    for i, part in ipairs(parts) do
      local last = i == #parts and not trailing_separator
      if part:find(":", 1, true) then return nil, "an alternate data stream" end
      if part == "." then -- nothing
      elseif part == ".." then
        -- Never above the root. In a \\?\ path Win32 would hand ".." on as
        -- a name, which NTFS refuses: judging the lexical result can only
        -- refuse what would have failed anyway.
        out[#out] = nil
      else
        if not verbatim then
          if last then
            part = part:gsub("[. ]+$", "")
          elseif part:find("[. ]$") then
            return nil, "a folder name that ends in a dot or a space"
          end
        end
        if is_device_name(part) then return nil, "a device" end
        if part ~= "" then out[#out + 1] = part end
      end
    end
    return out
  end

  -- The root of an absolute path ("C:\" or "\\server\share") and the text
  -- after it, with "\" as the only separator; verbatim for \\?\ forms.
  local function split_root(p)
    local verbatim = false
    local head = p:sub(1, 4)
    if head == "\\\\?\\" or head == "\\??\\" then
      verbatim = true
      p = p:sub(5)
      if upper(p:sub(1, 4)) == "UNC\\" then
        p = "\\\\" .. p:sub(5)
      elseif not p:match("^[A-Za-z]:$") and not p:match("^[A-Za-z]:\\") then
        return nil, "a path in the object manager's namespace" -- GLOBALROOT, Volume{...}
      end
    elseif head == "\\\\.\\" then
      return nil, "a device"
    end
    local drive, rest = p:match("^([A-Za-z]):(.*)$")
    if drive then return upper(drive) .. ":\\", rest, verbatim end
    local server, share, tail = p:match("^\\\\([^\\]+)\\([^\\]+)(.*)$")
    if server and server ~= "." and server ~= ".." and share ~= "." and share ~= ".."
        and not (server .. share):find(":", 1, true) then
      return "\\\\" .. server .. "\\" .. share, tail, verbatim
    end
    return nil, "a network path without a share"
  end

  -- The current folder, in this form.
  local function cwd()
    local c = sys.realpath(".")
    return c and P.absolute(c)
  end

  --- The absolute form of path, read as Win32 reads it (see the top):
  --- "C:\dir\name" or "\\server\share\dir\name", no "." or "..", no
  --- trailing separator but at a drive's root; relative paths against base
  --- (or the current folder). Lexical: no file is looked at. nil, why for
  --- what is refused.
  function P.absolute(path, base)
    if type(path) ~= "string" or path == "" then return nil, "not a path" end
    if path:find("\0", 1, true) then return nil, "a NUL byte" end -- the C side would stop there
    local p = path:gsub("/", "\\")
    if not (p:match("^[A-Za-z]:\\") or p:sub(1, 2) == "\\\\" or p:sub(1, 4) == "\\??\\") then
      local here = base and P.absolute(base) or cwd()
      if not here then return nil, "no current folder" end
      local drive, rest = p:match("^([A-Za-z]):(.*)$")
      if drive then
        -- "C:x" is relative to C:'s own current folder: known only when
        -- C: is the current drive.
        if upper(here:sub(1, 1)) ~= upper(drive) then
          return nil, "relative to another drive's folder"
        end
        p = here .. "\\" .. rest
      elseif p:sub(1, 1) == "\\" then
        p = (here:match("^[A-Za-z]:\\") and here:sub(1, 2) or here:match("^\\\\[^\\]+\\[^\\]+")) .. p
      else
        p = here .. "\\" .. p
      end
    end
    local root, rest, verbatim = split_root(p)
    if not root then return nil, rest end
    local names, why = names_of(rest, verbatim)
    if not names then return nil, why end
    if #names == 0 then return root end
    return (root:sub(-1) == "\\" and root or root .. "\\") .. table.concat(names, "\\")
  end

  --- Is path a device: \\.\..., a \\?\ path that is neither a drive's nor
  --- a share's (\\?\pipe\x, \\?\GLOBALROOT\...), a server's pipes or
  --- mailslots (\\server\pipe\x), or a DOS device name such as NUL?
  function P.is_device(path)
    if type(path) ~= "string" then return false end
    local p = path:gsub("/", "\\")
    if p:sub(1, 4) == "\\\\.\\" then return true end
    if p:sub(1, 4) == "\\\\?\\" or p:sub(1, 4) == "\\??\\" then
      p = p:sub(5)
      if upper(p:sub(1, 4)) == "UNC\\" then
        p = "\\\\" .. p:sub(5)
      elseif not p:match("^[A-Za-z]:") then
        return true
      end
    end
    local share = fold(p:match("^\\\\[^\\]+\\([^\\]+)") or "")
    if share == "pipe" or share == "mailslot" then return true end
    for part in p:gmatch("[^\\:]+") do
      if is_device_name(part) then return true end
    end
    return false
  end

  -- What comparisons use: the absolute form, ASCII letters folded.
  function P.key(path)
    local a = P.absolute(path)
    return a and fold(a)
  end

  local function parent_of(abs)
    local parent, name = abs:match("^(.*)\\([^\\]+)$")
    if not parent then return nil end
    if parent:match("^[A-Za-z]:$") then parent = parent .. "\\" end
    if parent == "\\" or parent:match("^\\\\[^\\]*$") then return nil end -- "\\server\share" is a root
    return parent, name
  end

  local function join(dir, name)
    return (dir:sub(-1) == "\\" and dir or dir .. "\\") .. name
  end

  function P.resolve(path, base, depth)
    depth = depth or 0
    if depth > 40 then return nil end -- a loop of links
    local abs = P.absolute(path, base)
    if not abs then return nil end
    local real = sys.realpath(abs)
    if real then return P.absolute(real) end
    local parent, name = parent_of(abs)
    if not parent then return nil end
    local target = sys.readlink(abs)
    if target then return P.resolve(target, parent, depth + 1) end
    local p = P.resolve(parent, nil, depth + 1)
    return p and join(p, name)
  end

  -- Both resolved (P.resolve): compared case-insensitively.
  function P.within(path, dir)
    local p, d = fold(path), fold(dir)
    if p == d then return true end
    if d:sub(-1) ~= "\\" then d = d .. "\\" end
    return p:sub(1, #d) == d
  end

  -- file:///C:/x -> C:/x; file://server/share/x -> \\server\share\x.
  function P.from_file_uri(uri)
    local host, p = (type(uri) == "string" and uri or ""):match("^file://([^/]*)(/.*)$")
    if not p then return nil end
    p = p:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end)
    if host ~= "" and fold(host) ~= "localhost" then return "\\\\" .. host .. p end
    return (p:gsub("^/([A-Za-z]:)", "%1"))
  end

  function P.tmp_dir(getenv)
    for _, name in ipairs { "TMP", "TEMP" } do
      local t = getenv(name)
      if t and t ~= "" then return t end
    end
    local home = getenv("USERPROFILE")
    return home and (home .. "\\AppData\\Local\\Temp") or "C:\\Windows\\Temp"
  end

  function P.expand_home(entry, getenv)
    if not entry:match("^~[/\\]") then return entry end
    local home = getenv("USERPROFILE") or getenv("HOME") or ""
    return home .. "\\" .. entry:sub(3)
  end

  -- mcp.paths: the known folders as Windows sets them in every process's
  -- environment (the profile, Roaming and Local AppData); Windows keeps no
  -- cache folder apart, so programs keep theirs in Local AppData. HOME,
  -- which some shells set, is not Windows'.
  function P.user_folders(getenv)
    local function folder(name)
      local v = getenv(name)
      if v and P.is_absolute(v) then return v end
    end
    local profile, roaming, locals = folder("USERPROFILE"), folder("APPDATA"), folder("LOCALAPPDATA")
    return { home = profile, config = roaming, data = locals or (profile and profile .. "\\AppData\\Local"),
             cache = locals or (profile and profile .. "\\AppData\\Local"), temp = P.tmp_dir(getenv) }
  end

  -- Lua's os.tmpname on Windows only names a file (tmpnam): the name it
  -- returns is what the check judges.
  P.tmpname_probe = nil

  return P
end

--- The rules of a platform ("posix" or "windows") over a file system
--- (sys.realpath, sys.readlink). A new table each time: the permission
--- checks keep theirs to themselves.
function M.new(platform, sys)
  if platform == "windows" then return windows(sys) end
  if platform == nil or platform == "posix" then return posix(sys) end
  error("mcp.path: unknown platform " .. tostring(platform), 2)
end

return M
