-- The official TypeScript SDK v2 client (@modelcontextprotocol/client,
-- pinned in spec/package.json) in its three version modes: pinned to
-- 2026-07-28, auto (probe with server/discover, fall back to initialize)
-- and legacy (initialize). Over stdio (the SDK spawns luamcp; in pin and
-- auto it spawns a second, short-lived one for the probe) and Streamable
-- HTTP (one luamcp serves all three modes, so both eras from one process).
--
-- Against scripts/demo every primitive must work in each mode; against
-- spec/fixtures/modern the tool `greet` (ctx:elicit, then ctx:sample) must
-- answer the same in both eras. What was negotiated is read from the
-- messages that crossed the wire (spec/clients/sdk_v2.mjs records them),
-- not only from what the client says.

local client = require "mcp_client"
local http = require "http_client"
local run_node = require("node_runner").run

local MODERN, LEGACY = "2026-07-28", "2025-11-25"
local PV = "io.modelcontextprotocol/protocolVersion"
local MODES = { "pin", "auto", "legacy" }
local DEMO, FIXTURE = "scripts/demo", "spec/fixtures/modern"

local LUAMCP = io.popen("readlink -f " .. client.LUAMCP):read("l")

-- One client run: mode, job (demo or greet), and either the scripts to
-- spawn over stdio or the URL of a running server.
local function run(mode, job, target)
  local wire = os.tmpname()
  local args = { "spec/clients/sdk_v2.mjs", mode, job, wire, "stdio", LUAMCP, target }
  if target:find("^http://") then args[5], args[6], args[7] = "http", target, nil end
  local ok, r = pcall(run_node, args, 30000)
  for _, f in ipairs { wire, wire .. ".in", wire .. ".out" } do os.remove(f) end
  assert(ok, r)
  return r
end

-- One run per mode, in MODES order, into runs[mode]; the server (when the
-- spec started one) is stopped whatever happens.
local function run_modes(runs, job, scripts, target_of)
  local target, stop = target_of(scripts)
  local ok, err = pcall(function()
    for _, mode in ipairs(MODES) do runs[mode] = run(mode, job, target) end
  end)
  if stop then stop() end
  assert(ok, err)
end

local function meta_version(message)
  local params = message.params
  return type(params) == "table" and type(params._meta) == "table" and params._meta[PV] or nil
end

-- The requests the client sent (method set, id set), and the response to one.
local function requests(r, method)
  local found = {}
  for _, m in ipairs(r.wire.sent) do
    if m.id ~= nil and m.method and (method == nil or m.method == method) then found[#found + 1] = m end
  end
  return found
end

local function response_to(r, id)
  for _, m in ipairs(r.wire.received) do
    if m.id == id and m.method == nil then return m end
  end
end

local function server_requests(r)
  local found = {}
  for _, m in ipairs(r.wire.received) do
    if m.id ~= nil and m.method then found[#found + 1] = m.method end
  end
  return found
end

local function text_of(result)
  assert.is_table(result, "no result")
  return result.content[1].text
end

-- What must hold on the wire for a run in this mode.
local function assert_negotiated(r, mode, transport)
  assert.is_nil(r.error, r.stderr)
  assert.is_true(r.ok)
  local modern = mode ~= "legacy"
  assert.are.equal(modern and MODERN or LEGACY, r.negotiated)
  assert.are.equal(modern and "modern" or "legacy", r.era)

  local initialize, discover = requests(r, "initialize"), requests(r, "server/discover")
  if modern then
    assert.are.equal(0, #initialize)
    assert.are.equal(1, #discover)
    local answer = response_to(r, discover[1].id)
    assert.is_table(answer and answer.result, "no answer to server/discover")
    assert.are.same({ MODERN }, answer.result.supportedVersions)
    assert.are.equal("complete", answer.result.resultType)
    for _, m in ipairs(requests(r)) do
      assert.are.equal(MODERN, meta_version(m), m.method)
      local reply = response_to(r, m.id)
      if reply and reply.result then assert.is_string(reply.result.resultType, m.method) end
    end
  else
    assert.are.equal(0, #discover)
    assert.are.equal(1, #initialize)
    assert.are.equal(LEGACY, initialize[1].params.protocolVersion)
    assert.are.equal(LEGACY, response_to(r, initialize[1].id).result.protocolVersion)
    for _, m in ipairs(r.wire.sent) do assert.is_nil(meta_version(m), m.method) end
  end

  if transport == "http" then
    local session
    for _, e in ipairs(r.wire.exchanges) do
      if modern then
        assert.are.equal(MODERN, e.headers["mcp-protocol-version"])
        assert.is_nil(e.headers["mcp-session-id"])
        assert.is_nil(e.responseHeaders and e.responseHeaders["mcp-session-id"])
        assert.are.equal("POST", e.method)
      elseif e.body and e.body.method == "initialize" then
        session = e.responseHeaders["mcp-session-id"]
        assert.is_string(session)
      else
        assert.are.equal(LEGACY, e.headers["mcp-protocol-version"])
        assert.are.equal(session, e.headers["mcp-session-id"])
      end
    end
  end
end

local function describe_demo(transport, target_of)
  describe("the TypeScript SDK v2 client with scripts/demo over " .. transport, function()
    local runs = {}
    -- lazy: only when a test of the block runs, so that a --filter run
    -- ("over stdio", for a foreign build: spec/run-all.sh) skips the rest.
    lazy_setup(function() run_modes(runs, "demo", DEMO, target_of) end)

    for _, mode in ipairs(MODES) do
      local modern = mode ~= "legacy"
      describe("in " .. mode .. " mode", function()
        it("negotiates " .. (modern and MODERN or LEGACY) .. ", as the wire shows", function()
          assert_negotiated(runs[mode], mode, transport)
          assert.are.equal("demo", runs[mode].serverVersion.name)
          assert.is_table(runs[mode].capabilities.tools)
          assert.truthy(runs[mode].instructions:find("demo", 1, true))
        end)

        it("lists and calls tools, with progress and argument errors", function()
          local r = runs[mode]
          local names = {}
          for _, t in ipairs(r.tools.tools) do names[t.name] = true end
          assert.is_true(names.add and names.roll_dice and names.countdown and names.write_note)
          assert.are.same({ { type = "text", text = "5" } }, r.add.content)
          assert.are.equal(2, #r.dice.structuredContent.rolls)
          assert.are.equal("Liftoff!", text_of(r.countdown))
          assert.are.equal(3, #r.progress)
          assert.are.equal(3, r.progress[3].progress)
          assert.is_true(r.badArgs.isError)
          assert.truthy(text_of(r.badArgs):find('/a: expected integer, got string "two"', 1, true))
          assert.are.equal(-32602, r.unknownTool.code)
        end)

        it("reads resources and templates, and a note written by a tool", function()
          local r = runs[mode]
          assert.are.equal("resource_link", r.note.content[1].type)
          assert.are.equal("written in " .. mode .. " mode", r.written.contents[1].text)
          assert.truthy(r.index.contents[1].text:find("welcome", 1, true))
          assert.are.equal("notes://{name}", r.templates.resourceTemplates[1].uriTemplate)
          assert.truthy(r.welcome.contents[1].text:find("Welcome", 1, true))
          -- An unknown resource: -32602 with data.uri in 2026-07-28, -32002
          -- before; the SDK reports both as ResourceNotFoundError.
          assert.are.equal("notes://missing", r.missing.uri)
          local asked = requests(r, "resources/read")
          local last = response_to(r, asked[#asked].id)
          assert.are.equal(modern and -32602 or -32002, last.error.code)
          assert.are.same({ uri = "notes://missing" }, last.error.data)
        end)

        it("gets a prompt and completes its argument", function()
          local r = runs[mode]
          assert.are.equal("summarize_note", r.prompts.prompts[1].name)
          assert.are.equal(2, #r.prompt.messages)
          assert.are.equal("resource", r.prompt.messages[1].content.type)
          assert.are.same({ "welcome" }, r.complete.completion.values)
        end)

        if modern then
          it("carries cache hints, and listens with an acknowledged filter", function()
            local r = runs[mode]
            for _, method in ipairs { "tools/list", "resources/list", "resources/templates/list", "prompts/list", "resources/read" } do
              local reply = response_to(r, requests(r, method)[1].id)
              assert.are.equal(0, reply.result.ttlMs, method)
              assert.are.equal("private", reply.result.cacheScope, method)
            end
            assert.are.same({ toolsListChanged = true, resourceSubscriptions = { "notes://welcome" } },
              r.listen.honoredFilter)
            assert.are.equal("local", r.listen.closed)
          end)
        else
          it("pings", function()
            assert.are.same({}, runs[mode].ping)
          end)
        end
      end)
    end
  end)
end

-- One greet per mode, in this order; each call's ctx:once block runs once
-- however many rounds it takes, so over HTTP (one server for all three)
-- the ticket counts the calls, and over stdio (a fresh server each) it is 1.
local function describe_greet(transport, target_of)
  describe("the TypeScript SDK v2 client with an elicit-then-sample tool over " .. transport, function()
    local runs = {}
    lazy_setup(function() run_modes(runs, "greet", FIXTURE, target_of) end)

    for i, mode in ipairs(MODES) do
      local modern = mode ~= "legacy"
      local ticket = transport == "http" and i or 1
      it(mode .. ": the same answer as in every other mode, each question asked once", function()
        local r = runs[mode]
        assert_negotiated(r, mode, transport)
        assert.are.equal(("Ada / (Greet Ada in French) / ticket %d"):format(ticket), text_of(r.greet))
        assert.are.equal(tostring(ticket), text_of(r.sideEffects))
        assert.are.same({ { message = "Your name?", requestedSchema = { type = "object",
          properties = { name = { type = "string" } }, required = { "name" } } } }, r.asked.elicitation)
        assert.are.equal(1, #r.asked.sampling)
        assert.are.equal("Greet Ada in French", r.asked.sampling[1].messages[1].content.text)
      end)

      it(mode .. (modern and ": input_required rounds, the handler re-run, no request to the client"
                          or ": real requests to the client in one call"), function()
        local r = runs[mode]
        local calls = {}
        for _, m in ipairs(requests(r, "tools/call")) do
          if m.params.name == "greet" then calls[#calls + 1] = m end
        end
        if modern then
          assert.are.same({}, server_requests(r))
          assert.are.equal(3, #calls)
          for round = 1, 2 do
            local reply = response_to(r, calls[round].id).result
            assert.are.equal("input_required", reply.resultType)
            assert.is_string(reply.requestState)
            assert.is_table(reply.inputRequests)
            assert.are.equal(reply.requestState, calls[round + 1].params.requestState)
            assert.is_table(calls[round + 1].params.inputResponses)
          end
          assert.are.equal("complete", response_to(r, calls[3].id).result.resultType)
        else
          assert.are.same({ "elicitation/create", "sampling/createMessage" }, server_requests(r))
          assert.are.equal(1, #calls)
        end
      end)
    end
  end)
end

local function over_stdio(scripts) return scripts end

local function over_http(scripts)
  local server = http.start { scripts }
  return server.url, function() server:stop_cleanly() end
end

describe_demo("stdio", over_stdio)
describe_demo("http", over_http)
describe_greet("stdio", over_stdio)
describe_greet("http", over_http)
