-- stderr is the log's, and a client may pipe it and never read it (the MCP
-- spec allows that): the server must go on answering, dropping log lines
-- rather than blocking on a full pipe.

local client = require "mcp_client"
local cjson = client.json

describe("a client that never reads stderr", function()
  it("still gets every answer while the log and the trace fill the pipe", function()
    -- --trace - writes every message to stderr: 64 KiB of pipe fill after
    -- a few hundred calls.
    local server = client.spawn({ "run", "--trace", "-", "--log-level", "debug", "spec/fixtures/kitchen" },
                                { unread_stderr = true })
    server:initialize()
    local count = 5000
    local lines = {}
    local big = string.rep("x", 200)
    for i = 1, count do
      lines[i] = cjson.encode { jsonrpc = "2.0", id = i, method = "tools/call",
                                params = { name = "echo", arguments = { value = big } } }
    end
    server:write(table.concat(lines, "\n") .. "\n")
    local answered = 0
    local ok = client.wait_until(function()
      while #server.lines > 0 do
        local msg = cjson.decode(table.remove(server.lines, 1))
        if msg.id and msg.result then answered = answered + 1 end
      end
      return answered == count or server.exited
    end, 120000)
    assert.is_false(server.exited)
    assert.is_true(ok, ("%d of %d answered: the server blocked on stderr"):format(answered, count))
    local pong = server:request("ping", nil, 10000)
    assert.is_table(pong and pong.result)
    server:kill("sigkill")
    server:close()
  end)
end)
