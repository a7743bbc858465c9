-- mcp.test_folder: where `luamcp test` runs busted. A project's specs say
-- testing.server(".") and busted looks for spec/ and .busted in the
-- working directory, so `luamcp test hello/spec` from anywhere runs in
-- hello, as `cd hello && luamcp test spec` would: busted's -C moves there,
-- and every path given is rewritten to be read from there.

local core = require "luamcp.client"

local M = {}

local function parent(path)
  return path:match("^(.*)/[^/]+$")
end

--- The project a path given to `luamcp test` belongs to: the nearest
--- folder, from the path itself up, that holds a spec/ folder; nil if none.
local function project_of(real)
  local dir = core.exists(real) == "directory" and real or parent(real)
  while dir and dir ~= "" do
    if core.exists(dir .. "/spec") == "directory" then return dir end
    dir = parent(dir)
  end
  return nil
end

--- real as seen from the folder root ("." for root itself), or real.
local function relative(root, real)
  if real == root then return "." end
  if real:sub(1, #root + 1) == root .. "/" then return real:sub(#root + 2) end
  return real
end

--- busted's arguments for `luamcp test ARGS`: ARGS as they are when they
--- name no path, or run from the working directory's project, or choose
--- a folder themselves (-C, --directory); else -C PROJECT first and every
--- path made relative to PROJECT (an option's value that is a path, like
--- --helper FILE, too: busted reads it from there).
function M.busted_args(args)
  local first
  for _, a in ipairs(args) do
    if a == "-C" or a:match("^%-%-directory") or a:match("^%-C.") then return args end
    if not first and a:sub(1, 1) ~= "-" and core.exists(a) then first = a end
  end
  if not first then return args end
  local root = project_of(core.realpath(first) or first)
  if not root or root == core.realpath(".") then return args end
  local out = { "-C", root }
  for _, a in ipairs(args) do
    local real = a:sub(1, 1) ~= "-" and core.exists(a) and core.realpath(a)
    out[#out + 1] = real and relative(root, real) or a
  end
  return out
end

return M
