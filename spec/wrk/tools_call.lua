-- wrk script: tools/call of the `add` tool on one existing MCP session over
-- Streamable HTTP. Every request has its own id; a response that is not the
-- expected JSON result is counted and reported at the end.
--
--   MCP_SESSION_ID=<id> wrk -t2 -c16 -d10s -s spec/wrk/tools_call.lua http://127.0.0.1:PORT/mcp
--
-- spec/wrk/run.sh starts a server, creates the session and runs 1, 16 and 64
-- connections.

local session = os.getenv("MCP_SESSION_ID")
if not session or session == "" then
  error("set MCP_SESSION_ID to a session id (the Mcp-Session-Id of an initialize response)")
end

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["Mcp-Session-Id"] = session
wrk.headers["MCP-Protocol-Version"] = "2025-11-25"

local threads = {}
local thread_count = 0

function setup(thread)
  thread_count = thread_count + 1
  thread:set("thread_no", thread_count)
  threads[#threads + 1] = thread
end

local sent = 0
bad = 0       -- read back by done() through thread:get
last_bad = "" -- the first unexpected body, for the report

function request()
  sent = sent + 1
  -- Ids are unique across threads: thread number, then a counter.
  local body = ('{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"add","arguments":{"a":2,"b":3}}}')
    :format(thread_no * 1000000000 + sent)
  return wrk.format(nil, nil, nil, body)
end

function response(status, headers, body)
  if status ~= 200 or not body:find('"result":{"content":[{"text":"5","type":"text"}]}', 1, true) then
    bad = bad + 1
    if last_bad == "" then last_bad = status .. " " .. body:sub(1, 200) end
  end
end

function done(summary, latency, requests)
  local total_bad, example = 0, ""
  for _, t in ipairs(threads) do
    total_bad = total_bad + t:get("bad")
    if example == "" then example = t:get("last_bad") end
  end
  io.write(("tools/call responses: %d, unexpected: %d%s\n"):format(summary.requests, total_bad,
    example ~= "" and (" (first: " .. example .. ")") or ""))
end
