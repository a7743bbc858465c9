-- The fixture server of the official MCP conformance suite
-- (@modelcontextprotocol/conformance), written with luamcp. Every tool,
-- resource and prompt the suite's server scenarios call is here, and each
-- one is also a short example of a feature.
local mcp = require "mcp"

mcp.server { name = "luamcp-conformance", version = "1.0.0",
             instructions = "Fixtures for the official MCP conformance suite." }

-- A 1x1 PNG and a 44-byte WAV header, as raw bytes (mcp.image and
-- mcp.audio base64-encode them).
local PNG = mcp.base64.decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==")
local WAV = mcp.base64.decode("UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=")

local NO_ARGS = { type = "object", properties = {} }

mcp.tool { name = "test_simple_text", description = "Returns a simple text response", inputSchema = NO_ARGS,
  handler = function() return "This is a simple text response for testing." end }

mcp.tool { name = "test_image_content", description = "Returns an image", inputSchema = NO_ARGS,
  handler = function() return mcp.image(PNG, "image/png") end }

mcp.tool { name = "test_audio_content", description = "Returns audio", inputSchema = NO_ARGS,
  handler = function() return mcp.audio(WAV, "audio/wav") end }

mcp.tool { name = "test_embedded_resource", description = "Returns an embedded resource", inputSchema = NO_ARGS,
  handler = function()
    return mcp.embedded { uri = "test://embedded-resource", mimeType = "text/plain",
                          text = "This is an embedded resource content." }
  end }

mcp.tool { name = "test_multiple_content_types", description = "Returns text, an image and a resource",
  inputSchema = NO_ARGS,
  handler = function()
    return {
      mcp.text("Multiple content types test:"),
      mcp.image(PNG, "image/png"),
      mcp.embedded { uri = "test://mixed-content-resource", mimeType = "application/json",
                     text = mcp.json.encode { test = "data", value = 123 } },
    }
  end }

mcp.tool { name = "test_tool_with_logging", description = "Logs three messages while it runs", inputSchema = NO_ARGS,
  handler = function(args, ctx)
    ctx:log("info", "Tool execution started")
    mcp.sleep(50)
    ctx:log("info", "Tool processing data")
    mcp.sleep(50)
    ctx:log("info", "Tool execution completed")
    return "Tool with logging executed successfully"
  end }

mcp.tool { name = "test_tool_with_progress", description = "Reports progress 0, 50, 100", inputSchema = NO_ARGS,
  handler = function(args, ctx)
    for _, step in ipairs { 0, 50, 100 } do
      ctx:progress(step, 100, ("Completed step %d of 100"):format(step))
      if step < 100 then mcp.sleep(50) end
    end
    return tostring(ctx.progress_token)
  end }

mcp.tool { name = "test_error_handling", description = "Always fails (as a tool error)", inputSchema = NO_ARGS,
  handler = function() error("This tool intentionally returns an error for testing", 0) end }

mcp.tool { name = "test_reconnection", description = "Closes its SSE stream mid-call; the client resumes it",
  inputSchema = NO_ARGS,
  handler = function(args, ctx)
    ctx:close_sse_stream()
    mcp.sleep(100)
    return "Reconnection test completed successfully. If you received this, the client properly reconnected after stream closure."
  end }

mcp.tool { name = "test_sampling", description = "Asks the client's model to complete a prompt",
  inputSchema = { type = "object", required = { "prompt" },
                  properties = { prompt = { type = "string", description = "The prompt to send to the LLM" } } },
  handler = function(args, ctx)
    local ok, result = pcall(ctx.sample, ctx, { messages = { args.prompt }, maxTokens = 100 })
    if not ok then return "Sampling not supported or error: " .. tostring(result) end
    return "LLM response: " .. tostring(result.content and result.content.text)
  end }

local function elicitation_text(prefix, result)
  return ("%s: action=%s, content=%s"):format(prefix, result.action, mcp.json.encode(result.content or mcp.object()))
end

mcp.tool { name = "test_elicitation", description = "Asks the user for a response",
  inputSchema = { type = "object", required = { "message" },
                  properties = { message = { type = "string", description = "The message to show the user" } } },
  handler = function(args, ctx)
    local result = ctx:elicit {
      message = args.message,
      requestedSchema = { type = "object", required = { "response" },
                          properties = { response = { type = "string", description = "User's response" } } },
    }
    return elicitation_text("User response", result)
  end }

mcp.tool { name = "test_elicitation_sep1034_defaults", description = "Elicitation with default values (SEP-1034)",
  inputSchema = NO_ARGS,
  handler = function(args, ctx)
    local result = ctx:elicit {
      message = "Please review and update the form fields with defaults",
      requestedSchema = { type = "object", required = {}, properties = {
        name = { type = "string", description = "User name", default = "John Doe" },
        age = { type = "integer", description = "User age", default = 30 },
        score = { type = "number", description = "User score", default = 95.5 },
        status = { type = "string", description = "User status", enum = { "active", "inactive", "pending" },
                   default = "active" },
        verified = { type = "boolean", description = "Verification status", default = true },
      } },
    }
    return elicitation_text("Elicitation completed", result)
  end }

local function titled(options)
  local out = {}
  for i, o in ipairs(options) do out[i] = { const = o[1], title = o[2] } end
  return out
end

mcp.tool { name = "test_elicitation_sep1330_enums", description = "Elicitation with enum forms (SEP-1330)",
  inputSchema = NO_ARGS,
  handler = function(args, ctx)
    local result = ctx:elicit {
      message = "Please select options from the enum fields",
      requestedSchema = { type = "object", required = {}, properties = {
        untitledSingle = { type = "string", description = "Select one option", enum = { "option1", "option2", "option3" } },
        titledSingle = { type = "string", description = "Select one option with titles",
          oneOf = titled { { "value1", "First Option" }, { "value2", "Second Option" }, { "value3", "Third Option" } } },
        legacyEnum = { type = "string", description = "Select one option (legacy)", enum = { "opt1", "opt2", "opt3" },
          enumNames = mcp.array { "Option One", "Option Two", "Option Three" } },
        untitledMulti = { type = "array", description = "Select multiple options", minItems = 1, maxItems = 3,
          items = { type = "string", enum = { "option1", "option2", "option3" } } },
        titledMulti = { type = "array", description = "Select multiple options with titles", minItems = 1, maxItems = 3,
          items = { anyOf = titled { { "value1", "First Choice" }, { "value2", "Second Choice" }, { "value3", "Third Choice" } } } },
      } },
    }
    return elicitation_text("Elicitation completed", result)
  end }

-- The schema is JSON text, so it reaches clients byte for byte ($schema,
-- $defs, $anchor, if/then/else, additionalProperties: false).
mcp.tool { name = "json_schema_2020_12_tool", description = "Tool with JSON Schema 2020-12 features",
  inputSchema = [[{
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {"address": {"$anchor": "addressDef", "type": "object",
              "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"},
                   "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                   "phone": {"type": "string"}, "email": {"type": "string"}},
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": false
  }]],
  handler = function(args) return "JSON Schema 2020-12 tool called with: " .. mcp.json.encode(args) end }
