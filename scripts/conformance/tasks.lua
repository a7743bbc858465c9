-- The tools the tasks extension's scenarios (tasks-*) call. A tool with
-- `task` set runs as an MCP task when the request declares the extension
-- (io.modelcontextprotocol/tasks), and as an ordinary call otherwise.
local mcp = require "mcp"

local function text(s) return { content = { { type = "text", text = s } } } end

local confirm_form = {
  type = "object",
  properties = { confirm = { type = "boolean", description = "Go ahead?" } },
  required = { "confirm" },
}

mcp.tool { name = "greet", description = "Greets someone (never a task)",
  inputSchema = { type = "object", properties = { name = { type = "string" } } },
  handler = function(args) return "Hello, " .. tostring(args.name or "World") .. "!" end }

mcp.tool { name = "slow_compute", description = "Sleeps for `seconds`, then answers; a task for clients that can poll",
  inputSchema = { type = "object", properties = { seconds = { type = "number" }, label = { type = "string" } } },
  task = true,
  handler = function(args, ctx)
    local seconds = args.seconds or 1
    ctx:progress(0, seconds, "started")
    mcp.sleep(seconds * 1000)
    return ("%s: done after %g s"):format(args.label or "slow_compute", seconds)
  end }

mcp.tool { name = "failing_job", description = "Works a second, then fails as a tool error (tasks only)",
  inputSchema = { type = "object" }, task = "required",
  handler = function()
    mcp.sleep(1000)
    return nil, "the job failed (on purpose)"
  end }

mcp.tool { name = "protocol_error_job", description = "Ends in a JSON-RPC error, not a tool error",
  inputSchema = { type = "object" }, task = true,
  handler = function()
    mcp.sleep(100)
    mcp.rpc_error(-32603, "Internal error: the job broke (on purpose)")
  end }

mcp.tool { name = "confirm_delete", description = "Asks the user to confirm, then deletes (pretends to)",
  inputSchema = { type = "object", properties = { filename = { type = "string" } } }, task = true,
  handler = function(args, ctx)
    local answer = ctx:elicit { message = "Delete " .. tostring(args.filename) .. "?", requestedSchema = confirm_form }
    if answer.action == "accept" and answer.content and answer.content.confirm then
      return "Deleted " .. tostring(args.filename)
    end
    return "Kept " .. tostring(args.filename)
  end }

mcp.tool { name = "multi_input", description = "Asks two questions at once",
  inputSchema = { type = "object" }, task = true,
  handler = function(_, ctx)
    local form = { type = "object", properties = { name = { type = "string" }, confirm = { type = "boolean" } } }
    local answers = ctx:ask {
      first = { "elicit", { message = "First question", requestedSchema = form } },
      second = { "elicit", { message = "Second question", requestedSchema = form } },
    }
    return ("answers: %s, %s"):format(answers.first.action, answers.second.action)
  end }

-- Asks in the request first (input_required), then turns into a task once
-- it has the answer and works on (after_ms: a call still running after
-- 50 ms becomes a task).
mcp.tool { name = "test_tool_with_task", description = "Asks for a name, then works on it as a task",
  inputSchema = { type = "object" }, task = { after_ms = 50, required = true },
  handler = function(_, ctx)
    local answer = ctx:elicit { message = "What is your name?",
      requestedSchema = { type = "object", properties = { user_name = { type = "string" }, name = { type = "string" } } } }
    local content = answer.content or {}
    local name = content.user_name or content.name or "stranger"
    mcp.sleep(300)
    return text("Hello, " .. tostring(name) .. "! (from a task)")
  end }
