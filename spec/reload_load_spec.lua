-- Load while reloading: a client keeps calling tools (well over 200 calls a
-- second, some of them waiting across a reload) while the script is
-- rewritten every 250 ms for 30 s (RELOAD_LOAD_SECONDS). Not one response
-- may fail or go missing, and the old generations must all be freed.

local client = require "mcp_client"
local uv = require "luv"

local SECONDS = tonumber(os.getenv("RELOAD_LOAD_SECONDS") or "30")
local IN_FLIGHT = 16

local function script(version)
  return ([[
local mcp = require "mcp"
mcp.tool { name = "fast", description = "v%d", handler = function(args) return args.n * 2 end }
mcp.tool { name = "slow", description = "v%d", handler = function(args) mcp.sleep(30) return args.n * 2 end }
mcp.tool { name = "info", description = "generations", handler = function() return mcp.info() end }
]]):format(version, version)
end

local function save(path, text)
  client.write_file(path .. ".tmp", text)
  assert(os.rename(path .. ".tmp", path))
end

describe("reloading under load", function()
  it(("loses no call while the script is rewritten every 250 ms for %d s"):format(SECONDS), function()
    local dir = client.temp_dir()
    save(dir .. "/tools.lua", script(0))
    local server = client.spawn { "dev", dir, "--trace", "/dev/null" }
    server:initialize()

    local sent, answered, failed, next_id = 0, 0, 0, 1000
    local outstanding = {}
    local function send_one()
      local id = next_id
      next_id = next_id + 1
      local name = id % 4 == 0 and "slow" or "fast"
      outstanding[id] = id
      server:send(('{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"%s","arguments":{"n":%d}}}')
        :format(id, name, id))
      sent = sent + 1
    end
    for _ = 1, IN_FLIGHT do send_one() end

    local version, last_write = 0, uv.hrtime()
    local start = uv.hrtime()
    local reader = uv.new_timer()
    while (uv.hrtime() - start) / 1e9 < SECONDS do
      uv.run("once")
      while #server.lines > 0 do
        local line = table.remove(server.lines, 1)
        local msg = client.json.decode(line)
        if msg.id then
          local n = outstanding[msg.id]
          outstanding[msg.id] = nil
          answered = answered + 1
          if not (n and msg.result and not msg.result.isError and tonumber(msg.result.content[1].text) == n * 2) then
            failed = failed + 1
          end
          send_one()
        end
      end
      if (uv.hrtime() - last_write) / 1e6 >= 250 then
        version = version + 1
        save(dir .. "/tools.lua", script(version))
        last_write = uv.hrtime()
      end
    end
    reader:close()
    -- Collect the last answers.
    client.wait_until(function()
      while #server.lines > 0 do
        local msg = client.json.decode(table.remove(server.lines, 1))
        if msg.id and outstanding[msg.id] then
          outstanding[msg.id] = nil
          answered = answered + 1
          if not (msg.result and not msg.result.isError) then failed = failed + 1 end
        end
      end
      return next(outstanding) == nil
    end, 3000)
    local missing = 0
    for _ in pairs(outstanding) do missing = missing + 1 end
    local rate = answered / SECONDS
    print(("\n# %d calls in %d s (%.0f/s) across %d rewrites: %d failed, %d missing"):format(
      answered, SECONDS, rate, version, failed, missing))
    assert.are.equal(0, failed)
    assert.are.equal(0, missing, server.stderr:sub(-3000))
    assert.is_true(rate >= 200, ("only %.0f calls/s"):format(rate))
    assert.is_true(version >= SECONDS * 3, "too few rewrites")
    -- Every older generation is freed once its calls are done.
    local open
    assert.is_true(client.wait_until(function()
      open = server:call_tool("info", {}).structuredContent.generations_open
      return open == 1
    end, 3000), "generations still open: " .. tostring(open))
    local info = server:call_tool("info", {}).structuredContent
    assert.is_true(info.reloads >= version / 2, "reloads: " .. info.reloads)
    server:close()
    client.remove_tree(dir)
  end)
end)
