-- What one A2A SendMessage costs the server (issue #46's bench: luamcp's
-- agent beside the @a2a-js/sdk server, bench/a2a.sh), counted as the
-- server's instructions under callgrind: the same on a loaded machine as on
-- an idle one, where the bench's requests/s and CPU µs are not.
--
-- The server (bench/servers/a2a, the bench's agent) answers N1 requests in
-- one run and N2 in another; the difference over N2 - N1 is one request's
-- instructions, start-up and shutdown cancelling out.

local http = require "http_client"
local mcp_client = require "mcp_client"
local cjson = mcp_client.json

local AGENT = "bench/servers/a2a"
local N1, N2 = 200, 1200
-- One request's bound. An MCP tools/call over Streamable HTTP costs about
-- 111,000 (its schema check included); an A2A SendMessage cost 147,000
-- before bench/results/2026-12-06-a2a.md's work, 126,000 after (the same
-- request answered by a stub in place of lua/mcp/a2a.lua: 68,000).
local MAX_PER_REQUEST = 135000

local function skip_reason()
  if not os.execute("command -v valgrind >/dev/null 2>&1") then return "valgrind is not installed" end
  if os.execute("ldd " .. mcp_client.LUAMCP .. " 2>/dev/null | grep -q libasan") then
    return "valgrind cannot run the ASan build (the release run covers this)"
  end
end

-- The server under callgrind answering n SendMessage requests "add i i" on
-- one keep-alive connection (each answer checked); its instructions.
local function instructions(n)
  local out = os.tmpname()
  local proc = mcp_client.spawn({ "--tool=callgrind", "--callgrind-out-file=" .. out, mcp_client.LUAMCP,
    "run", "--http", "127.0.0.1:0", "--drain-time", "0", AGENT }, { bin = "valgrind" })
  local server = setmetatable({ proc = proc, conns = {} }, http.Server)
  assert(mcp_client.wait_until(function()
    server.port = tonumber(proc.stderr:match("serving MCP over HTTP at http://[^:]+:(%d+)/"))
    return server.port or proc.exited
  end, 120000) and server.port, "luamcp did not start:\n" .. proc.stderr)
  local conn = server:connect()
  for i = 1, n do
    local r = conn:request { method = "POST", path = "/a2a", timeout_ms = 60000,
      headers = { ["Content-Type"] = "application/json", ["A2A-Version"] = "1.0" },
      body = cjson.encode { jsonrpc = "2.0", id = i, method = "SendMessage", params = { message = {
        messageId = "m" .. i, role = "ROLE_USER", parts = { { text = ("add %d %d"):format(i, i) } } } } } }
    assert(r and r.status == 200, "no answer to request " .. i .. ":\n" .. proc.stderr)
    local message = r.json and r.json.result and r.json.result.message
    assert(message and message.parts[1].text == tostring(2 * i), r.body)
  end
  server:stop_cleanly()
  local f = assert(io.open(out))
  local text = f:read("a")
  f:close()
  os.remove(out)
  return assert(tonumber(text:match("\nsummary: (%d+)") or text:match("\ntotals: (%d+)")), "no totals in callgrind's output")
end

describe("an A2A SendMessage", function()
  it("costs the server at most " .. MAX_PER_REQUEST .. " instructions (callgrind)", function()
    local why = skip_reason()
    if why then
      pending(why)
      return
    end
    local per_request = (instructions(N2) - instructions(N1)) // (N2 - N1)
    assert.is_true(per_request <= MAX_PER_REQUEST,
      ("one SendMessage costs %d instructions (at most %d wanted)"):format(per_request, MAX_PER_REQUEST))
  end)
end)
