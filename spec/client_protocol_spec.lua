-- lua/mcp/client_protocol.lua on its own: pure functions, loaded here with
-- plain Lua and cjson (no luamcp C module), as the server-side mcp.client
-- loads it in the server's Lua state.

local cjson = require "cjson"

local function load_protocol()
  local chunk = assert(loadfile("lua/mcp/client_protocol.lua"))
  return chunk()
end

local ARRAY = setmetatable({}, { __mode = "k" })
local codec = {
  encode = cjson.encode, decode = cjson.decode, null = cjson.null,
  array = function(t) ARRAY[t] = true return t end,
  object = function(t) return t end,
}

describe("mcp.client_protocol", function()
  local P, proto
  setup(function()
    P = load_protocol()
    proto = P.new(codec)
  end)

  local state = { protocol_version = "2026-07-28", client_info = { name = "t", version = "1" }, capabilities = {} }

  it("builds a 2026-07-28 request: _meta and the standard headers", function()
    local m, h = proto.request(state, 7, "tools/call", { name = "add", arguments = { a = 1 } })
    assert.equal(7, m.id)
    assert.equal("2026-07-28", m.params._meta["io.modelcontextprotocol/protocolVersion"])
    assert.same({ name = "t", version = "1" }, m.params._meta["io.modelcontextprotocol/clientInfo"])
    assert.same({}, m.params._meta["io.modelcontextprotocol/clientCapabilities"])
    assert.same({ ["MCP-Protocol-Version"] = "2026-07-28", ["Mcp-Method"] = "tools/call", ["Mcp-Name"] = "add" }, h)
    _, h = proto.request(state, 8, "resources/read", { uri = "notes://a" })
    assert.equal("notes://a", h["Mcp-Name"])
  end)

  it("builds a session-era request: no _meta; the version header once initialized", function()
    local session = { protocol_version = "2025-11-25", initialized = true }
    local m, h = proto.request(session, 1, "tools/list")
    assert.is_nil(m.params)
    assert.same({ ["MCP-Protocol-Version"] = "2025-11-25" }, h)
    m, h = proto.initialize({ protocol_version = "2025-11-25", client_info = {}, capabilities = {} }, 1)
    assert.equal("initialize", m.method)
    assert.equal("2025-11-25", m.params.protocolVersion)
    assert.same({}, h)
  end)

  it("reads server/discover's answer: modern, retry, fall back, or fail", function()
    assert.equal("modern", (proto.discover_outcome({ supportedVersions = { "2026-07-28" } }, nil, nil, "2026-07-28")))
    assert.equal("session", (proto.discover_outcome({}, nil, nil, "2026-07-28")))
    assert.equal("session", (proto.discover_outcome({ supportedVersions = { "2025-11-25" } }, nil, nil, "2026-07-28")))
    local kind, v = proto.discover_outcome(nil, { code = -32022, data = { supported = { "2026-07-28" } } }, 400, "2026-07-28")
    assert.equal("retry", kind)
    assert.equal("2026-07-28", v)
    assert.equal("session", (proto.discover_outcome(nil, { code = -32601, message = "no" }, nil, "2026-07-28")))
    assert.equal("session", (proto.discover_outcome(nil, { code = -32000, message = "no session" }, 400, "2026-07-28")))
    assert.equal("fail", (proto.discover_outcome(nil, { code = -32000, message = "who are you" }, 401, "2026-07-28")))
    assert.equal("fail", (proto.discover_outcome(nil, { code = -32000, message = "down" }, 503, "2026-07-28")))
  end)

  it("validates x-mcp-header declarations and builds Mcp-Param values", function()
    local schema = { type = "object", properties = {
      region = { type = "string", ["x-mcp-header"] = "Region" },
      n = { type = "integer", ["x-mcp-header"] = "N" },
      flag = { type = "boolean", ["x-mcp-header"] = "Flag" },
      nested = { type = "object", properties = { deep = { type = "string", ["x-mcp-header"] = "Deep" } } },
    } }
    local d = assert(proto.header_declarations(schema))
    assert.equal(4, #d)
    assert.same({ ["Mcp-Param-Region"] = "us", ["Mcp-Param-N"] = "3", ["Mcp-Param-Flag"] = "false",
      ["Mcp-Param-Deep"] = "=?base64?IHggeCA=?=" },
      proto.param_headers(d, { region = "us", n = 3, flag = false, nested = { deep = " x x " } }))
    assert.same({}, proto.param_headers(d, { region = cjson.null }))
    local bad = {
      { type = "object", properties = { v = { type = "string", ["x-mcp-header"] = "" } } },
      { type = "object", properties = { v = { type = "number", ["x-mcp-header"] = "V" } } },
      { type = "object", properties = { v = { type = "object", ["x-mcp-header"] = "V" } } },
      { type = "object", properties = { v = { type = "string", ["x-mcp-header"] = "Has Space" } } },
      { type = "object", properties = { a = { type = "string", ["x-mcp-header"] = "X" },
                                        b = { type = "string", ["x-mcp-header"] = "x" } } },
      { type = "object", items = { type = "string", ["x-mcp-header"] = "V" } },
      { type = "object", anyOf = { { properties = { v = { type = "string", ["x-mcp-header"] = "V" } } } } },
    }
    for i, s in ipairs(bad) do
      local ok, why = proto.header_declarations(s)
      assert.is_nil(ok, "case " .. i)
      assert.is_string(why)
    end
  end)

  it("encodes header values: plain ASCII as is, anything else in Base64", function()
    assert.equal("us-west1", P.encode_header_value("us-west1"))
    assert.equal("=?base64?SGVsbG8sIOS4lueVjA==?=", P.encode_header_value("Hello, 世界"))
    assert.equal("=?base64?bGluZTEKbGluZTI=?=", P.encode_header_value("line1\nline2"))
    assert.equal("=?base64??=", P.encode_header_value(""))
  end)

  it("answers input_required with the handlers and echoes requestState exactly", function()
    local handlers = { elicit = function() return { action = "accept", content = {} } end, apply_defaults = true,
      roots = { "file:///tmp" } }
    local result = { resultType = "input_required", requestState = "opaque",
      inputRequests = {
        ask = { method = "elicitation/create", params = { message = "?", requestedSchema = { type = "object",
          properties = { n = { type = "integer", default = 30 } } } } },
        roots = { method = "roots/list" },
      } }
    local kind, params = proto.input_step(result, { name = "t", arguments = {} }, handlers, 1)
    assert.equal("retry", kind)
    assert.equal("opaque", params.requestState)
    assert.same({ action = "accept", content = { n = 30 } }, params.inputResponses.ask)
    assert.equal("file:///tmp", params.inputResponses.roots.roots[1].uri)
    assert.equal("t", params.name)
    kind, params = proto.input_step({ resultType = "input_required", inputRequests = {
      s = { method = "sampling/createMessage", params = {} } } }, {}, handlers, 1)
    assert.equal("fail", kind)
    assert.truthy(params:find("does not sample", 1, true))
    assert.equal("done", (proto.input_step({ content = {} }, {}, handlers, 1)))
    assert.equal("fail", (proto.input_step({ resultType = "input_required", requestState = "x" }, {}, handlers,
      P.MAX_INPUT_ROUNDS + 1)))
    assert.same({ name = "t" }, P.retry_params({ name = "t", requestState = "old" }, nil, nil))
  end)
end)
