-- A small notebook: a tool writes notes, a resource template reads them, a
-- prompt asks the model to summarise one, and completion suggests names.
local mcp = require "mcp"

-- mcp.state keeps the notes across reloads under `luamcp dev`: edit this
-- file and the notes written so far are still there.
local notes = mcp.state("notes", {
  welcome = "Welcome to luamcp. Edit scripts/demo/*.lua and run `luamcp dev scripts/demo`.",
})

local function note_names(prefix)
  local names = {}
  for name in pairs(notes) do
    if name:sub(1, #prefix) == prefix then names[#names + 1] = name end
  end
  table.sort(names)
  return names
end

mcp.tool {
  name = "write_note", title = "Write a note", description = "Save a note under a name (replaces any note with that name)",
  inputSchema = { type = "object", required = { "name", "text" },
                  properties = { name = { type = "string", pattern = "^[A-Za-z0-9_-]+$", maxLength = 64 },
                                 text = { type = "string" } } },
  handler = function(args)
    if not args.name:match("^[%w_-]+$") then error("note names use letters, digits, - and _", 0) end
    notes[args.name] = args.text
    mcp.notify_resource_updated("notes://" .. args.name)
    return mcp.resource_link { uri = "notes://" .. args.name, name = args.name, mimeType = "text/plain" }
  end,
}

mcp.resource {
  uri = "notes://index", name = "index", title = "All notes", mimeType = "text/plain",
  description = "The names of every note, one per line",
  read = function() return table.concat(note_names(""), "\n") end,
}

mcp.template {
  uriTemplate = "notes://{name}", name = "note", title = "A note", mimeType = "text/plain",
  read = function(vars) return notes[vars.name] end,   -- nil: resource not found
  complete = { name = note_names },
}

mcp.prompt {
  name = "summarize_note", title = "Summarize a note", description = "Ask for a short summary of one note",
  arguments = { { name = "name", description = "The note's name", required = true } },
  get = function(args)
    local text = notes[args.name]
    if not text then error("there is no note called " .. args.name, 0) end
    return {
      { role = "user", content = mcp.embedded { uri = "notes://" .. args.name, text = text, mimeType = "text/plain" } },
      "Summarize the note above in one sentence.",
    }
  end,
  complete = { name = note_names },
}

-- Asks the user before it deletes (elicitation), when the client can be
-- asked; a client without elicitation gets the note deleted as asked.
mcp.tool {
  name = "delete_note", title = "Delete a note", description = "Delete a note, after the user confirms it",
  args = { name = "string" },
  annotations = { destructiveHint = true, idempotentHint = true },
  handler = function(args, ctx)
    if notes[args.name] == nil then return mcp.tool_error("there is no note called " .. args.name) end
    if type(ctx.capabilities) == "table" and type(ctx.capabilities.elicitation) == "table" then
      local answer = ctx:elicit {
        message = "Delete the note " .. args.name .. "?",
        requestedSchema = { type = "object", required = { "confirm" },
                            properties = { confirm = { type = "boolean", description = "Yes, delete it" } } },
      }
      if answer.action ~= "accept" or not answer.content.confirm then return "kept " .. args.name end
    end
    notes[args.name] = nil
    mcp.notify_resource_updated("notes://" .. args.name)
    return "deleted " .. args.name
  end,
}
