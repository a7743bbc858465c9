-- Tools, resources, templates, prompts and completions registered from Lua.

local client = require "mcp_client"
local cjson = client.json

describe("primitives", function()
  local server
  before_each(function()
    server = client.spawn { "run", "spec/fixtures/kitchen" }
    server:initialize()
  end)
  after_each(function() server:close() end)

  describe("tools", function()
    it("lists tools in registration order", function()
      local r = server:request("tools/list", {})
      local names = {}
      for i, t in ipairs(r.result.tools) do names[i] = t.name end
      assert.are.same({ "add", "echo", "typeof" }, { names[1], names[2], names[3] })
      assert.is_nil(r.result.nextCursor)
    end)

    it("answers an unknown tool with -32602", function()
      local r = server:request("tools/call", { name = "nope", arguments = {} })
      assert.are.equal(-32602, r.error.code)
      assert.are.equal("Unknown tool: nope", r.error.message)
    end)

    it("treats omitted arguments as {}", function()
      local r = server:request("tools/call", { name = "typeof" })
      assert.are.same({}, r.result.structuredContent)
    end)

    it("refuses arguments that are not an object", function()
      local r = server:request("tools/call", { name = "typeof", arguments = { 1, 2 } })
      assert.are.equal(-32602, r.error.code)
    end)

    it("turns a handler error into an isError result, traceback to the log", function()
      local r = server:call_tool("fail", {})
      assert.are.same({ content = { { type = "text", text = "boom" } }, isError = true }, r)
      r = server:call_tool("fail_deep", {})
      assert.is_true(r.isError)
      assert.truthy(r.content[1].text:find("attempt to index a nil value", 1, true))
      assert.is_nil(r.content[1].text:find("traceback", 1, true))
      assert.truthy(server.stderr:find("stack traceback", 1, true))
    end)

    it("converts each kind of handler result", function()
      assert.are.same({ content = { { type = "text", text = "true" } } }, server:call_tool("boolean", {}))
      assert.are.same({ content = { { type = "text", text = "[1,2,3]" } } }, server:call_tool("list", {}))
      local r = server:call_tool("echo", { value = "x" })
      assert.are.same({ value = "x" }, r.structuredContent)
      assert.are.equal('{"value":"x"}', r.content[1].text)
      r = server:call_tool("content_list", {})
      assert.are.equal(3, #r.content)
      assert.are.same({ type = "image", mimeType = "image/png", data = "iVBORw0K" }, r.content[2])
      assert.are.same({ type = "resource_link", uri = "kitchen://hello", name = "hello" }, r.content[3])
      assert.are.same({ content = { { type = "text", text = "custom" } }, isError = true }, server:call_tool("full_result", {}))
    end)

    it("reports a result that cannot be JSON as a tool error", function()
      local r = server:call_tool("nan", {})
      assert.is_true(r.isError)
      assert.truthy(r.content[1].text:find("NaN", 1, true))
      r = server:call_tool("function_result", {})
      assert.is_true(r.isError)
      assert.truthy(r.content[1].text:find("function", 1, true))
    end)

    it("refuses io.popen and os.execute with a clear error", function()
      local r = server:call_tool("popen", {})
      assert.is_true(r.isError)
      assert.truthy(r.content[1].text:find("io.popen is not available in luamcp", 1, true))
    end)

    it("gives handlers their context", function()
      local r = server:request("tools/call", { name = "ctx_info", arguments = {}, _meta = { progressToken = "tok", x = 1 } })
      local info = r.result.structuredContent
      assert.are.equal(r.id, info.id)
      assert.are.equal("integer", info.idtype)
      assert.are.equal("tools/call", info.method)
      assert.are.equal("2025-11-25", info.version)
      assert.are.same({ name = "busted", version = "1.0" }, info.client)
      assert.are.same({ progressToken = "tok", x = 1 }, info.meta)
    end)

    it("reports a yield that is not luamcp's as a tool error, and lets scripts use their own coroutines", function()
      local r = server:call_tool("yield", {})
      assert.is_true(r.isError)
      assert.truthy(r.content[1].text:find("coroutine.yield", 1, true))
      assert.are.equal("3", server:call_tool("own_coroutine", {}).content[1].text)
    end)

    it("makes a ctx kept past its request fail cleanly", function()
      server:call_tool("keep_ctx", {})
      local text = server:call_tool("use_kept_ctx", {}).content[1].text
      assert.are.equal("this request has already ended; ctx is only valid during it|true", text:gsub("^.-: ", ""))
    end)

    it("sends progress for a progressToken, increasing", function()
      local r = server:request("tools/call", { name = "progress", arguments = { steps = 3 }, _meta = { progressToken = 7 } })
      assert.are.equal("done", r.result.content[1].text)
      local p = server:notifications_named("notifications/progress")
      assert.are.equal(3, #p)
      for i = 1, 3 do
        assert.are.same({ progressToken = 7, progress = i, total = 3, message = "step " .. i }, p[i].params)
      end
      r = server:call_tool("progress_backwards", {}, { progressToken = "t" })
      assert.truthy(r.content[1].text:find("progress must increase", 1, true))
    end)

    it("sends no progress without a progressToken", function()
      server:call_tool("progress", { steps = 2 })
      assert.are.equal(0, #server:notifications_named("notifications/progress"))
    end)

    it("paginates with --page-size and refuses an invalid cursor", function()
      server:close()
      server = client.spawn { "run", "spec/fixtures/kitchen", "--page-size", "5" }
      server:initialize()
      local seen, cursor, pages = {}, nil, 0
      repeat
        local r = server:request("tools/list", { cursor = cursor })
        assert.is_true(#r.result.tools <= 5)
        for _, t in ipairs(r.result.tools) do seen[#seen + 1] = t.name end
        cursor = r.result.nextCursor
        pages = pages + 1
      until not cursor
      local all = server:request("tools/list", {})
      assert.is_true(pages > 1)
      assert.are.equal("add", seen[1])
      local r = server:request("tools/list", { cursor = "garbage!" })
      assert.are.equal(-32602, r.error.code)
    end)
  end)

  describe("list_changed", function()
    it("is sent when tools are added, disabled, enabled and removed after start", function()
      server:call_tool("register", { name = "late" })
      assert.are.equal(1, #server:notifications_named("notifications/tools/list_changed"))
      assert.are.equal("I am late", server:call_tool("late", {}).content[1].text)
      server:call_tool("disable", { name = "late" })
      assert.are.equal(-32602, server:request("tools/call", { name = "late" }).error.code)
      server:call_tool("enable", { name = "late" })
      server:call_tool("unregister", { name = "late" })
      assert.are.equal(4, #server:notifications_named("notifications/tools/list_changed"))
      local r = server:request("tools/list", {})
      for _, t in ipairs(r.result.tools) do assert.are_not.equal("late", t.name) end
    end)
  end)

  describe("resources", function()
    it("lists resources and templates", function()
      local r = server:request("resources/list", {})
      assert.are.same({ uri = "kitchen://hello", name = "hello", title = "Hello", mimeType = "text/plain" }, r.result.resources[1])
      r = server:request("resources/templates/list", {})
      assert.are.same({ uriTemplate = "kitchen://items/{id}", name = "item", mimeType = "text/plain" }, r.result.resourceTemplates[1])
    end)

    it("reads text, blobs and full contents", function()
      local r = server:request("resources/read", { uri = "kitchen://hello" })
      assert.are.same({ contents = { { uri = "kitchen://hello", mimeType = "text/plain", text = "Hello, world" } } }, r.result)
      r = server:request("resources/read", { uri = "kitchen://blob" })
      assert.are.same({ uri = "kitchen://blob", mimeType = "application/octet-stream", blob = "AAEC/w==" }, r.result.contents[1])
      r = server:request("resources/read", { uri = "kitchen://multi" })
      assert.are.same({ { uri = "kitchen://multi", text = "one" },
                        { uri = "kitchen://multi#2", text = "two", mimeType = "text/markdown" } }, r.result.contents)
    end)

    it("reads through templates", function()
      local r = server:request("resources/read", { uri = "kitchen://items/42" })
      assert.are.same({ uri = "kitchen://items/42", mimeType = "text/plain", text = "item 42" }, r.result.contents[1])
      r = server:request("resources/read", { uri = "kitchen://items/a%20b" })
      assert.are.equal("item a b", r.result.contents[1].text)
      r = server:request("resources/read", { uri = "kitchen://files/a/b/c.txt" })
      assert.are.equal("file a/b/c.txt", r.result.contents[1].text)
    end)

    it("answers an unknown URI with -32002", function()
      for _, uri in ipairs { "kitchen://nope", "kitchen://items/missing", "kitchen://items/a/b" } do
        local r = server:request("resources/read", { uri = uri })
        assert.are.equal(-32002, r.error.code, uri)
        assert.are.same({ uri = uri }, r.error.data)
      end
    end)

    it("subscribes and notifies subscribers only", function()
      assert.are.same({}, server:request("resources/subscribe", { uri = "kitchen://hello" }).result)
      server:call_tool("touch", { uri = "kitchen://hello" })
      server:call_tool("touch", { uri = "kitchen://blob" })
      local updates = server:notifications_named("notifications/resources/updated")
      assert.are.same({ { jsonrpc = "2.0", method = "notifications/resources/updated", params = { uri = "kitchen://hello" } } }, updates)
      assert.are.same({}, server:request("resources/unsubscribe", { uri = "kitchen://hello" }).result)
      server:call_tool("touch", { uri = "kitchen://hello" })
      assert.are.equal(1, #server:notifications_named("notifications/resources/updated"))
    end)
  end)

  describe("prompts", function()
    it("lists prompts with their arguments", function()
      local r = server:request("prompts/list", {})
      assert.are.same({ name = "greet", title = "Greeting", description = "Greets someone",
        arguments = { { name = "name", description = "Who", required = true }, { name = "style" } } }, r.result.prompts[1])
    end)

    it("gets a prompt; a string becomes one user message", function()
      local r = server:request("prompts/get", { name = "greet", arguments = { name = "Ada", style = "loud" } })
      assert.are.same({ description = "Greets someone",
        messages = { { role = "user", content = { type = "text", text = "Hello, Ada!" } } } }, r.result)
      r = server:request("prompts/get", { name = "conversation" })
      assert.are.equal(2, #r.result.messages)
      assert.are.equal("assistant", r.result.messages[2].role)
    end)

    it("refuses a missing required argument, an unknown prompt and non-string arguments with -32602", function()
      assert.are.equal(-32602, server:request("prompts/get", { name = "greet", arguments = {} }).error.code)
      assert.are.equal(-32602, server:request("prompts/get", { name = "nope" }).error.code)
      assert.are.equal(-32602, server:request("prompts/get", { name = "greet", arguments = { name = 5 } }).error.code)
    end)
  end)

  describe("completion", function()
    it("completes prompt arguments", function()
      local r = server:request("completion/complete", { ref = { type = "ref/prompt", name = "greet" },
        argument = { name = "name", value = "al" } })
      assert.are.same({ completion = { values = { "alice", "alfred" }, total = 2, hasMore = false } }, r.result)
    end)

    it("completes template variables", function()
      local r = server:request("completion/complete", { ref = { type = "ref/resource", uri = "kitchen://items/{id}" },
        argument = { name = "id", value = "ap" } })
      assert.are.same({ "apple", "apricot" }, r.result.completion.values)
    end)

    it("caps values at 100 with total and hasMore", function()
      local r = server:request("completion/complete", { ref = { type = "ref/prompt", name = "greet" },
        argument = { name = "style", value = "" } })
      assert.are.equal(100, #r.result.completion.values)
      assert.are.equal(150, r.result.completion.total)
      assert.is_true(r.result.completion.hasMore)
    end)

    it("answers an argument with no completion with an empty list", function()
      local _, raw = server:request("completion/complete", { ref = { type = "ref/resource", uri = "kitchen://files/{+path}" },
        argument = { name = "path", value = "" } })
      assert.truthy(raw:find('"values":[]', 1, true), raw)
    end)

    it("refuses an unknown reference with -32602", function()
      local r = server:request("completion/complete", { ref = { type = "ref/prompt", name = "nope" }, argument = { name = "x", value = "" } })
      assert.are.equal(-32602, r.error.code)
    end)
  end)
end)
