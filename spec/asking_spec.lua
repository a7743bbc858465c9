-- Tools that ask the client (ctx:sample, ctx:elicit, ctx:roots), answered by
-- the official TypeScript SDK client over both transports: stdio (the SDK
-- spawns luamcp) and Streamable HTTP (luamcp listens, the SDK connects).
-- The fixture is spec/fixtures/asking; the client is spec/clients/sdk_asking.mjs.

local client = require "mcp_client"
local http = require "http_client"
local uv = require "luv"
local run_node = require("node_runner").run
local cjson = client.json

local ASKING = "spec/fixtures/asking"

local function text_of(result)
  assert.is_table(result, "no result")
  return result.content[1].text
end

local EXPECTED_ROOTS = { { name = "project", uri = "file:///tmp/project" }, { uri = "file:///home/ada" } }
local ELICIT_SCHEMA = { type = "object", required = { "name" },
  properties = { name = { type = "string", description = "Your name" }, age = { type = "integer" } } }

-- The same checks for both transports.
local function describe_sdk(transport, run)
  describe("the TypeScript SDK client answering sampling, elicitation and roots over " .. transport, function()
    local r
    setup(function() r = run() end)

    it("ran every step", function()
      assert.is_nil(r.error)
      assert.is_true(r.ok)
      assert.are.equal(transport, r.mode)
    end)

    it("ctx:sample sends sampling/createMessage and returns the client's result", function()
      assert.are.same({ messages = { { role = "user", content = { type = "text", text = "What is 2+2?" } } },
                        maxTokens = 50, systemPrompt = "Be brief." }, r.received.sampling[1])
      assert.are.same({ sampled = { role = "assistant", model = "test-model", stopReason = "endTurn",
                                    content = { type = "text", text = "echo: What is 2+2?" } } },
                      r.sample.structuredContent)
      assert.is_nil(r.sample.isError)
    end)

    it("a sampling error reply raises a Lua error the handler can catch", function()
      local text = text_of(r.sampleFail)
      assert.is_nil(r.sampleFail.isError)
      assert.truthy(text:find("^caught: "), text)
      assert.truthy(text:find("sampling/createMessage failed: the client answered with error -32042: no model here", 1, true), text)
    end)

    it("an uncaught error reply makes the call an isError result", function()
      assert.is_true(r.sampleUncaught.isError)
      assert.truthy(text_of(r.sampleUncaught):find("error -32042: no model here", 1, true))
    end)

    it("ctx:elicit sends elicitation/create with the schema and returns the answer", function()
      assert.are.same({ message = "Who are you?", requestedSchema = ELICIT_SCHEMA }, r.received.elicitation[1])
      assert.are.same({ elicited = { action = "accept", content = { name = "Ada", age = 36 } } }, r.elicit.structuredContent)
      assert.are.same({ elicited = { action = "decline" } }, r.elicitDecline.structuredContent)
    end)

    it("an elicitation error reply raises a catchable Lua error", function()
      local text = text_of(r.elicitFail)
      assert.truthy(text:find("^caught: .*elicitation/create failed: the client answered with error %-32042: the user walked away$"), text)
    end)

    it("ctx:roots returns the client's roots", function()
      assert.are.same({ roots = EXPECTED_ROOTS }, r.roots.structuredContent)
      local text = text_of(r.rootsFail)
      assert.truthy(text:find("^caught: .*roots/list failed: the client answered with error %-32042: roots are private$"), text)
    end)

    it("one call can ask all three in turn", function()
      assert.are.same({
        sampled = { role = "assistant", model = "test-model", stopReason = "endTurn", content = { type = "text", text = "echo: first" } },
        elicited = { action = "accept", content = { name = "Ada", age = 36 } },
        roots = EXPECTED_ROOTS,
      }, r.askAll.structuredContent)
      -- Every request the tools made reached the client, and nothing else.
      assert.are.equal(4, #r.received.sampling)
      assert.are.equal(4, #r.received.elicitation)
      assert.are.equal(3, r.received.roots)
    end)

    it("asks nothing of a client that declared no capabilities: the tool fails at once", function()
      assert.are.same({}, r.bareRequests)
      assert.is_true(r.bareSample.isError)
      assert.truthy(text_of(r.bareSample):find("ctx:sample: the client did not declare the sampling capability", 1, true))
      assert.are.equal("caught: ctx:sample: the client did not declare the sampling capability", text_of(r.bareSampleCaught))
      assert.is_true(r.bareElicit.isError)
      assert.truthy(text_of(r.bareElicit):find("ctx:elicit: the client did not declare the elicitation capability", 1, true))
      assert.are.equal("caught: ctx:roots: the client did not declare the roots capability", text_of(r.bareRoots))
      assert.are.equal("5", text_of(r.bareAdd))
    end)

    if transport == "http" then
      it("resumes a stream the server ended early (ctx:close_sse_stream) with Last-Event-ID", function()
        assert.are.same({ { type = "text", text = "finished, closed=true" } }, r.closeStream.content)
      end)
    end
  end)
end

describe_sdk("stdio", function()
  local luamcp = io.popen("readlink -f " .. client.LUAMCP):read("l")
  return run_node { "spec/clients/sdk_asking.mjs", "stdio", luamcp, ASKING }
end)

describe_sdk("http", function()
  local server = http.start { ASKING }
  local ok, r = pcall(run_node, { "spec/clients/sdk_asking.mjs", "http", server.url })
  server:stop_cleanly()
  assert(ok, r)
  return r
end)

describe("a client that does not answer", function()
  local server
  setup(function()
    server = client.spawn { "run", ASKING, "--client-timeout", "300" }
    server:initialize("2025-11-25", { sampling = cjson.decode("{}") })
  end)
  teardown(function() server:close() end)

  it("gets its request, and the waiting handler a catchable timeout error", function()
    server:send({ jsonrpc = "2.0", id = 1, method = "tools/call", params = { name = "sample_caught", arguments = { prompt = "hi" } } })
    local started = uv.hrtime()
    local response = server:await_response(1, 3000)
    local elapsed_ms = (uv.hrtime() - started) / 1e6
    assert.are.equal(1, #server.requests)
    assert.are.equal("sampling/createMessage", server.requests[1].method)
    assert.is_table(response)
    assert.truthy(text_of(response.result):find("^caught: .*sampling/createMessage failed: the client did not answer within 300 ms$"),
      text_of(response.result))
    assert.is_true(elapsed_ms >= 250, tostring(elapsed_ms))
    -- A late answer is ignored, and the session goes on.
    server:send({ jsonrpc = "2.0", id = server.requests[1].id, result = { role = "assistant", model = "m",
      content = { type = "text", text = "late" } } })
    local pong = server:request("ping", nil, 2000)
    assert.are.same({}, pong.result)
  end)
end)
