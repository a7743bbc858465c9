-- reaper: every process a spec starts is stopped when what started it ends,
-- whatever the outcome. The spawn helpers (mcp_client.spawn, so also
-- http_client.start and services; node_runner.run) call track(); the
-- busted helper spec/helpers/teardown.lua (named in .busted) tells the
-- reaper which test, describe block or file is running, and stops what each
-- left alive once it is over: a test's processes after its after_each (at
-- the next test's start, or its block's end), a block's or a file's after
-- their teardown. A spec's own stop_cleanly() and after_each still run
-- first and make their checks; this is the net for what a failed assertion
-- skipped. Stopping is SIGTERM, then SIGKILL after a grace; the process's
-- own children (a supervisor's workers, say) are sent SIGKILL if they
-- outlive it. Outside busted (the benchmarks) nothing is tracked.

local uv = require "luv"

local M = {}

M.GRACE_MS = 3000

local tracked = {} -- { proc, owner, name }
local scopes = {}  -- the running file / describe / test elements, innermost last
local finished = {} -- owners that are over: their processes go at the next reap

--- Register a started process. proc: pid, exited (set by its exit
--- callback), terminate(grace_ms) and close().
function M.track(proc)
  local owner = scopes[#scopes]
  if owner then tracked[#tracked + 1] = { proc = proc, owner = owner, name = owner.name } end
  return proc
end

local function read_stat(pid)
  local f = io.open("/proc/" .. pid .. "/stat")
  if not f then return nil end
  local stat = f:read("a") or ""
  f:close()
  -- pid (comm) state ppid ...: comm may hold spaces and parentheses.
  local state, ppid = stat:match("%) (%S) (%d+)")
  return state, tonumber(ppid)
end

--- Is pid a running process (not gone, not a zombie)?
function M.alive(pid)
  local state = read_stat(pid)
  return state ~= nil and state ~= "Z"
end

--- The pids of every living descendant of pid.
function M.descendants(pid)
  local children = {}
  local req = uv.fs_scandir("/proc")
  while req do
    local name = uv.fs_scandir_next(req)
    if not name then break end
    local p = tonumber(name)
    if p then
      local state, ppid = read_stat(p)
      if state and state ~= "Z" and ppid then
        children[ppid] = children[ppid] or {}
        table.insert(children[ppid], p)
      end
    end
  end
  local out, queue = {}, { pid }
  while #queue > 0 do
    local p = table.remove(queue)
    for _, c in ipairs(children[p] or {}) do
      out[#out + 1] = c
      queue[#queue + 1] = c
    end
  end
  return out
end

local function command_line(pid)
  local f = io.open("/proc/" .. pid .. "/cmdline")
  if not f then return "?" end
  local s = (f:read("a") or ""):gsub("%z", " ")
  f:close()
  return s
end

-- Stop one tracked process (and whatever it started that outlives it).
local function stop(entry)
  local proc = entry.proc
  uv.run("nowait") -- collect exits that already happened
  if not proc.exited and proc.pid and M.alive(proc.pid) then
    local tree = M.descendants(proc.pid)
    io.stderr:write(("# teardown: stopping pid %d left running by %q: %s\n")
      :format(proc.pid, entry.name or "?", command_line(proc.pid)))
    pcall(proc.terminate, proc, M.GRACE_MS)
    -- Give its children the same grace to follow it, then SIGKILL them.
    local deadline = uv.hrtime() + M.GRACE_MS * 1e6
    while uv.hrtime() < deadline do
      local left = false
      for _, p in ipairs(tree) do left = left or M.alive(p) end
      if not left then break end
      uv.sleep(50)
    end
    for _, p in ipairs(tree) do
      if M.alive(p) then uv.kill(p, "sigkill") end
    end
  end
  pcall(proc.close, proc) -- frees its handles (a no-op when already done)
end

-- Stop what the finished owners left, and forget the processes that are over.
local function reap()
  local keep = {}
  local done = {}
  for _, owner in ipairs(finished) do done[owner] = true end
  finished = {}
  for _, entry in ipairs(tracked) do
    if done[entry.owner] then
      local ok, err = pcall(stop, entry)
      if not ok then io.stderr:write("# teardown: " .. tostring(err) .. "\n") end
    else
      keep[#keep + 1] = entry
    end
  end
  tracked = keep
end

--- A file, describe block or test starts.
function M.enter(element)
  reap() -- what the previous test left, its after_each being over now
  scopes[#scopes + 1] = element
end

--- A test ends (before its after_each runs): its processes go at the next
--- reap, once the after_each had its turn.
function M.test_ended(element)
  if scopes[#scopes] == element then scopes[#scopes] = nil end
  finished[#finished + 1] = element
end

--- A describe block or a file ends (after its teardown): stop what it and
--- anything inside it left (what is inside ended before it, so it is among
--- the finished owners already).
function M.leave(element)
  while #scopes > 0 do
    local top = table.remove(scopes)
    finished[#finished + 1] = top
    if top == element then break end
  end
  reap()
end

return M
