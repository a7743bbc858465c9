-- The tools the 2026-07-28 scenarios of the conformance suite call: asking
-- the client through input_required results (SEP-2322), the diagnostic
-- tools of server-stateless (SEP-2575), and a header-mirrored argument
-- (SEP-2243). Each handler is plain luamcp: the same code asks a
-- 2025-11-25 session with real requests.
local mcp = require "mcp"

local NO_ARGS = { type = "object", properties = {} }

local function form(field, kind)
  return { type = "object", properties = { [field] = { type = kind or "string" } }, required = { field } }
end

local function text(s) return { type = "text", text = s } end

local function sampled_text(result)
  local c = result.content
  if c and c.type == "text" then return c.text end
  return "(no text)"
end

mcp.tool { name = "test_input_required_result_elicitation", description = "Asks the user's name, then greets them",
  inputSchema = NO_ARGS,
  handler = function(_, ctx)
    local answer = ctx:elicit({ message = "What is your name?", requestedSchema = form("name") }, "user_name")
    return text(("Hello, %s!"):format(answer.content and answer.content.name or "stranger"))
  end }

mcp.tool { name = "test_input_required_result_sampling", description = "Asks the client's model a question",
  inputSchema = NO_ARGS,
  handler = function(_, ctx)
    local answer = ctx:sample({ messages = { "What is the capital of France?" }, maxTokens = 100 }, "capital_question")
    return text("The model said: " .. sampled_text(answer))
  end }

mcp.tool { name = "test_input_required_result_list_roots", description = "Lists the client's roots",
  inputSchema = NO_ARGS,
  handler = function(_, ctx)
    local roots = ctx:roots("client_roots")
    local uris = {}
    for i, r in ipairs(roots) do uris[i] = r.uri end
    return text("Roots: " .. table.concat(uris, ", "))
  end }

mcp.tool { name = "test_input_required_result_request_state", description = "Asks for a confirmation",
  inputSchema = NO_ARGS,
  handler = function(_, ctx)
    local answer = ctx:elicit({ message = "Please confirm", requestedSchema = form("ok", "boolean") }, "confirm")
    -- Reaching here on a retry means the runtime accepted the sealed state.
    return text("state-ok: confirmed " .. tostring(answer.content and answer.content.ok))
  end }

mcp.tool { name = "test_input_required_result_multiple_inputs", description = "Asks three things at once",
  inputSchema = NO_ARGS,
  handler = function(_, ctx)
    local answers = ctx:ask {
      user_name = { "elicit", { message = "What is your name?", requestedSchema = form("name") } },
      greeting = { "sample", { messages = { "Generate a greeting" }, maxTokens = 50 } },
      client_roots = { "roots" },
    }
    return text(("%s, %s (%d roots)"):format(sampled_text(answers.greeting),
      answers.user_name.content and answers.user_name.content.name or "?", #answers.client_roots))
  end }

mcp.tool { name = "test_input_required_result_multi_round", description = "Asks two questions, one after the other",
  inputSchema = NO_ARGS,
  handler = function(_, ctx)
    local name = ctx:elicit({ message = "Step 1: What is your name?", requestedSchema = form("name") }, "step1")
    local color = ctx:elicit({ message = "Step 2: What is your favorite color?", requestedSchema = form("color") },
      "step2")
    return text(("%s likes %s"):format(name.content and name.content.name or "?",
      color.content and color.content.color or "?"))
  end }

mcp.tool { name = "test_input_required_result_tampered_state", description = "Asks, with a sealed requestState",
  inputSchema = NO_ARGS,
  handler = function(_, ctx)
    ctx:elicit({ message = "Continue?", requestedSchema = form("ok", "boolean") }, "confirm")
    return text("done")
  end }

mcp.tool { name = "test_input_required_result_capabilities", description = "Asks only what the client can answer",
  inputSchema = NO_ARGS,
  handler = function(_, ctx)
    local caps = ctx.capabilities or {}
    local questions = {}
    if caps.sampling then questions.question = { "sample", { messages = { "Say hi" }, maxTokens = 20 } } end
    if caps.elicitation then questions.form = { "elicit", { message = "Name?", requestedSchema = form("name") } } end
    if next(questions) == nil then return text("nothing to ask") end
    ctx:ask(questions)
    return text("answered")
  end }

mcp.prompt { name = "test_input_required_result_prompt", description = "A prompt that asks for its context first",
  get = function(_, ctx)
    local answer = ctx:elicit({ message = "What context should the prompt use?", requestedSchema = form("context") },
      "user_context")
    return "Use this context: " .. tostring(answer.content and answer.content.context)
  end }

-- server-stateless (SEP-2575) diagnostics.

mcp.tool { name = "test_missing_capability", description = "Needs sampling, which it does not check for",
  inputSchema = NO_ARGS,
  handler = function(_, ctx)
    return sampled_text(ctx:sample { messages = { "hello" }, maxTokens = 10 })
  end }

mcp.tool { name = "test_streaming_elicitation", description = "Reports progress, then asks the user",
  inputSchema = NO_ARGS,
  handler = function(_, ctx)
    ctx:log("info", "about to ask")
    local answer = ctx:elicit { message = "Go on?", requestedSchema = form("ok", "boolean") }
    return text("answer: " .. tostring(answer.action))
  end }

mcp.tool { name = "test_logging_tool", description = "Logs at every level", inputSchema = NO_ARGS,
  handler = function(_, ctx)
    for _, level in ipairs { "debug", "info", "warning", "error" } do ctx:log(level, "a " .. level .. " message") end
    return text("logged")
  end }

-- Run-time changes of the lists through mcp.everywhere: under --workers
-- every worker makes them, so whichever answers lists the same tools.
local extra_tool, extra_prompt
local toggle_tool = mcp.everywhere("toggle_dynamic_tool", function()
  if extra_tool then
    extra_tool:remove()
    extra_tool = nil
  else
    extra_tool = mcp.tool { name = "test_dynamic_tool", description = "Comes and goes",
      handler = function() return "here" end }
  end
end)
local toggle_prompt = mcp.everywhere("toggle_dynamic_prompt", function()
  if extra_prompt then
    extra_prompt:remove()
    extra_prompt = nil
  else
    extra_prompt = mcp.prompt { name = "test_dynamic_prompt", description = "Comes and goes",
      get = function() return "here" end }
  end
end)

mcp.tool { name = "test_trigger_tool_change", description = "Adds or removes a tool (tools/list_changed)",
  inputSchema = NO_ARGS,
  handler = function()
    toggle_tool()
    return text("tools changed")
  end }

mcp.tool { name = "test_trigger_prompt_change", description = "Adds or removes a prompt (prompts/list_changed)",
  inputSchema = NO_ARGS,
  handler = function()
    toggle_prompt()
    return text("prompts changed")
  end }

-- SEP-2243: an argument mirrored in the Mcp-Param-Region header.
mcp.tool { name = "test_header_param", description = "Echoes a region that gateways can route on",
  inputSchema = { type = "object", properties = { region = { type = "string", ["x-mcp-header"] = "Region" } },
                  required = { "region" } },
  handler = function(args) return text("region: " .. args.region) end }
