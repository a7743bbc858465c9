-- The runtime's building blocks, one small tool each: run a program
-- (mcp.exec), read files without blocking (mcp.fs), keep state across
-- reloads (mcp.state), do things at once (mcp.spawn, mcp.all), and ask the
-- client's model (ctx:sample).
--
--   luamcp dev scripts/toolbox      (TOOLBOX_ROOT: the folder list_files and
--                                    line_count may read; default: the current one)
local mcp = require "mcp"

mcp.server { name = "toolbox", version = "1.0.0",
  instructions = "Run git, read files, count lines in parallel, and summarise text with your model." }

local ROOT = os.getenv("TOOLBOX_ROOT") or "."

-- A path inside ROOT, or an error the model can act on.
local function inside(path)
  if path:find("%.%.") or path:sub(1, 1) == "/" then error("give a path inside " .. ROOT .. ", without ..", 0) end
  return ROOT .. "/" .. path
end

mcp.tool { name = "git_log", title = "Recent commits", description = "The last commits of the git repository in ROOT",
  inputSchema = { type = "object", properties = { count = { type = "integer", minimum = 1, maximum = 50, default = 5 } } },
  annotations = { readOnlyHint = true },
  handler = function(args)
    -- No shell: argv is the program and its arguments, as given.
    local r, err = mcp.exec { argv = { "git", "-C", ROOT, "log", "--oneline", "-n", tostring(args.count or 5) },
                              timeout_ms = 5000 }
    if not r then return nil, err end
    if r.code ~= 0 then return nil, "git: " .. r.stderr end
    return r.stdout
  end }

mcp.tool { name = "list_files", title = "List files", description = "The entries of a folder inside ROOT",
  inputSchema = { type = "object", properties = { path = { type = "string", default = "." } } },
  annotations = { readOnlyHint = true },
  handler = function(args)
    local entries, err = mcp.fs.list(inside(args.path or ".")) -- sorted by name
    if not entries then return nil, err end
    local lines = {}
    for i, e in ipairs(entries) do lines[i] = e.type == "directory" and e.name .. "/" or e.name end
    return table.concat(lines, "\n")
  end }

-- Counts every file at once: each mcp.fs.read waits on the thread pool,
-- and mcp.all waits for them all.
mcp.tool { name = "line_count", title = "Count lines", description = "Lines in each of the given files inside ROOT",
  inputSchema = { type = "object", required = { "paths" },
    properties = { paths = { type = "array", items = { type = "string" }, minItems = 1, maxItems = 20 } } },
  annotations = { readOnlyHint = true },
  handler = function(args)
    local jobs = {}
    for i, path in ipairs(args.paths) do
      jobs[i] = function()
        local data, err = mcp.fs.read(inside(path))
        if not data then return err end
        local _, lines = data:gsub("\n", "")
        return lines
      end
    end
    local counts = {}
    for i, result in ipairs(mcp.all(jobs)) do counts[args.paths[i]] = result end
    return counts
  end }

-- Survives `luamcp dev` reloads: edit this file and the count goes on.
local visits = mcp.state("visits", { count = 0 })

mcp.tool { name = "visit", title = "Visit", description = "Counts visits, across reloads",
  handler = function()
    visits.count = visits.count + 1
    return visits.count
  end }

mcp.tool { name = "summarize", title = "Summarize", description = "Asks your model for a one-line summary of a text",
  inputSchema = { type = "object", required = { "text" }, properties = { text = { type = "string" } } },
  handler = function(args, ctx)
    local reply = ctx:sample { messages = { "Summarise in one line:\n\n" .. args.text }, maxTokens = 100 }
    return reply.content.text
  end }
