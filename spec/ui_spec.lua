-- The web inspector (luamcp dev --ui, luamcp inspect --ui) used the way a
-- developer uses it: its page (runtime/ui/) in Debian's Chromium, headless,
-- driven by puppeteer-core (spec/clients/ui_browser.mjs), against the real
-- binary; and its listener refusing what is not the page. Screenshots of
-- each view are kept in build/artifacts/ui/ (timeline.png, tool-form.png,
-- elicitation.png, reload.png, reload-failed.png, filter.png, keyboard.png,
-- timeline-100k.png, progress.png, cancel.png, media.png, resources.png,
-- prompt.png, roots.png, keyboard-elicitation.png, era-2026.png,
-- task-working.png, task.png, inspect-*.png). Without Chromium or puppeteer-core (a fresh machine before
-- runtime/tools/deps.sh test and npm ci) the browser tests are skipped,
-- saying which is missing.

local client = require "mcp_client"
local http = require "http_client"
local node_runner = require "node_runner"
local reaper = require "reaper"
local uv = require "luv"
local cjson = client.json

local LUAMCP = io.popen("readlink -f " .. client.LUAMCP):read("l")
local NODE = io.popen("readlink -f " .. node_runner.NODE):read("l") or node_runner.NODE
local ROOT = io.popen("pwd"):read("l")
local ARTIFACTS = ROOT .. "/build/artifacts/ui"
local EXAMPLES = ROOT .. "/spec/node_modules/@modelcontextprotocol/sdk/dist/esm/examples/server"
local WAIT = 60000

local function chromium()
  for _, p in ipairs { os.getenv("CHROMIUM") or "", "/usr/bin/chromium", "/usr/bin/chromium-browser" } do
    if p ~= "" and uv.fs_access(p, "X") then return p end
  end
end
-- Why the browser tests cannot run here, or nil.
local function missing()
  if not chromium() then return "no chromium (Debian's chromium: runtime/tools/deps.sh test installs it)" end
  if not uv.fs_stat("spec/node_modules/puppeteer-core/package.json") then return "no puppeteer-core (cd spec && npm ci)" end
  if not uv.fs_access(node_runner.NODE, "X") then return "no Node 22 (cd spec && npm ci)" end
end

-- Start `luamcp ARGS` (dev --ui or inspect --ui) and wait for the address.
local function start_ui(args)
  local proc = client.spawn(args)
  local url
  client.wait_until(function()
    url = proc.stderr:match("luamcp: inspector at (http://127%.0%.0%.1:%d+/%?token=%x+)")
    return url or proc.exited
  end, WAIT)
  assert(url, "no inspector address on stderr:\n" .. proc.stderr)
  local port, token = url:match(":(%d+)/%?token=(%x+)")
  return proc, url, tonumber(port), token
end

local function copy_demo()
  local dir = client.temp_dir()
  assert(os.execute("cp -R scripts/demo/. " .. dir .. "/"))
  return dir
end

-- The demo with the fixtures beside it (spec/fixtures/ui: every kind of
-- result, a tool asking for roots).
local function copy_demo_and_fixtures()
  local dir = copy_demo()
  assert(os.execute("cp -R spec/fixtures/ui/. " .. dir .. "/"))
  return dir
end

-- Numbers in the page's words ("50,012 of 50,012 rows").
local function numbers(text)
  local out = {}
  for n in text:gmatch("[%d,.\226\128\175\194\160]+") do
    local digits = n:gsub("%D", "")
    if digits ~= "" then out[#out + 1] = tonumber(digits) end
  end
  return out
end

local function drive(url, scenario, args)
  return node_runner.run({ "spec/clients/ui_browser.mjs", chromium(), url, ARTIFACTS, scenario, cjson.encode(args or {}) }, 480000)
end

local function assert_png(file)
  local f = assert(io.open(file, "rb"), "no screenshot " .. file)
  local data = f:read("a")
  f:close()
  assert.are.equal("\137PNG\r\n\26\n", data:sub(1, 8), file .. " is not a PNG")
  assert.is_true(#data > 1000, file .. " is nearly empty")
end

local function free_port()
  local tcp = uv.new_tcp()
  assert(tcp:bind("127.0.0.1", 0))
  local port = tcp:getsockname().port
  tcp:close()
  uv.run("nowait")
  return port
end

describe("the web inspector", function()
  local proc, dir
  after_each(function()
    if proc then proc:terminate() proc:close() proc = nil end
    if dir then client.remove_tree(dir) dir = nil end
  end)

  it("refuses a wrong token, a missing token and a foreign Origin; serves its files to the loopback only", function()
    dir = copy_demo()
    local _, _, port, token
    proc, _, port, token = start_ui { "dev", dir, "--ui" }
    assert.are.equal(64, #token)
    local function get(path, headers)
      local c = http.connect(port)
      local r = c:request { method = "GET", path = path, headers = headers }
      c:close()
      return r
    end
    local ok = get("/info?token=" .. token)
    assert.are.equal(200, ok.status)
    assert.are.equal("hello", ok.json.kind)
    assert.are.equal("dev", ok.json.mode)
    local wrong = get("/info?token=" .. string.rep("0", 64))
    assert.are.equal(401, wrong.status)
    assert.is_string(wrong.json.error)
    assert.are.equal(401, get("/info").status)
    assert.are.equal(401, get("/events").status)
    local c = http.connect(port)
    local send = c:request { method = "POST", path = "/send", body = '{"jsonrpc":"2.0","id":1,"method":"ping"}',
                             headers = { ["Content-Type"] = "application/json" } }
    c:close()
    assert.are.equal(401, send.status)
    local foreign = get("/info?token=" .. token, { Origin = "http://evil.example" })
    assert.are.equal(403, foreign.status)
    assert.are.equal(200, get("/info?token=" .. token, { Origin = "http://127.0.0.1:" .. port }).status)
    -- the page's code: no data in it, no token needed, but a loopback Host
    local js = get("/app.js")
    assert.are.equal(200, js.status)
    assert.truthy(js.headers["content-type"]:find("javascript", 1, true))
    local c2 = http.connect(port)
    local rebinding = c2:request { method = "GET", path = "/app.js", host = "evil.example:" .. port }
    c2:close()
    assert.are.equal(403, rebinding.status)
    local page = get("/?token=" .. token)
    assert.are.equal(200, page.status)
    assert.truthy((page.headers["content-security-policy"] or ""):find("default-src 'self'", 1, true))
    assert.falsy(page.body:find("<script>", 1, true), "no inline script (the CSP forbids it)")
    assert.falsy(page.body:find("style=", 1, true), "no inline style (the CSP forbids it)")
  end)

  it("dev --ui in Chromium: a tool called through its form, paired in the timeline, an elicitation, reloads, filters, the keyboard", function()
    local why = missing()
    if why then return pending(why) end
    dir = copy_demo()
    local url
    proc, url = start_ui { "dev", dir, "--ui" }
    -- A real client on stdio beside the page: its conn shows in the timeline.
    proc:initialize()
    local r = proc:call_tool("add", { a = 20, b = 22 })
    assert.are.equal("42", r.content[1].text)

    local out = drive(url, "dev", { dir = dir })
    assert.is_nil(out.error, out.error)
    assert.are.same({}, out.problems)
    -- the lists and the form: add 2 + 3
    assert.truthy(table.concat(out.toolNames, " "):find("delete_note", 1, true))
    assert.are.equal("done", out.add.state)
    assert.truthy(out.add.text:find("5", 1, true), out.add.text)
    -- the response paired with its request, with the time between them
    assert.are.equal("true", out.addRow.paired)
    assert.are.equal("c2s", out.addRow.dir)
    assert.is_true(tonumber(out.addRow.durationMs) >= 0)
    assert.truthy(out.addRow.text:find("ms", 1, true) or out.addRow.text:find(" s", 1, true), out.addRow.text)
    assert.truthy(out.addRow.text:find("2025-11-25", 1, true), "the era is shown: " .. out.addRow.text)
    -- checked in the page: a missing b is said next to b, and nothing is sent
    assert.are.equal("required", out.invalid)
    assert.are.equal(1, out.callsAfterInvalid)
    -- the elicitation delete_note asks, answered in the page
    assert.are.equal("Delete the note welcome?", out.elicitationMessage)
    assert.truthy(out.deleted:find("deleted welcome", 1, true), out.deleted)
    -- replay: the same call again under a new id
    assert.are.equal(2, #out.replayIds)
    assert.are_not.equal(out.replayIds[1], out.replayIds[2])
    -- the reload lists the tool added; the failed one says file and line
    assert.truthy(out.reload[#out.reload]:find("+tool shout", 1, true), out.reload[#out.reload])
    assert.truthy(out.reloadDetail:find("added tool: shout", 1, true), out.reloadDetail)
    assert.truthy(out.reloadFailed[1]:find("math.lua:%d+"), out.reloadFailed[1])
    assert.truthy(out.reloadFailed[1]:find("still serving the previous version", 1, true))
    -- filtered by method and tool: only the add calls (the page's and stdio's)
    assert.is_true(#out.filtered >= 3)
    local conns = {}
    for _, row in ipairs(out.filtered) do
      assert.are.equal("tools/call", row.method)
      assert.are.equal("add", row.tool)
      conns[row.conn] = true
    end
    assert.is_true(conns.stdio and conns.ui, "both conns: " .. cjson.encode(out.filtered))
    assert.truthy(out.count:find("^" .. #out.filtered .. " of "), out.count)
    -- a refresh of the page keeps the history
    assert.truthy(out.afterRefresh.rows:match("^(%d+) of") and tonumber(out.afterRefresh.rows:match("^(%d+)")) > 10, out.afterRefresh.rows)
    -- keyboard only: Tab to the tool, Enter, type, Enter
    assert.is_true(out.keyboardReached)
    assert.truthy(out.keyboardResult:find("42", 1, true), out.keyboardResult)
    assert.truthy(out.keyboardSelected:find("^tl%-opt%-%d+$"), out.keyboardSelected)
    assert.are.equal("search", out.slashFocus)
    for _, name in ipairs { "timeline", "tool-form", "elicitation", "reload", "reload-failed", "filter", "keyboard" } do
      assert_png(ARTIFACTS .. "/" .. name .. ".png")
    end
  end)

  it("inspect --ui of the official TypeScript SDK's example server over stdio: sampling answered in the page", function()
    local why = missing()
    if why then return pending(why) end
    local url
    proc, url = start_ui { "inspect", "--ui", "--", NODE, EXAMPLES .. "/toolWithSampleServer.js" }
    local out = drive(url, "inspect", { name = "stdio", tool = "summarize", args = { text = "luamcp turns Lua scripts into MCP servers." },
                                        sampling = "Lua scripts as MCP servers." })
    assert.is_nil(out.error, out.error)
    assert.are.same({ "summarize" }, out.toolNames)
    assert.truthy(out.samplingShown:find("luamcp turns Lua scripts into MCP servers.", 1, true), out.samplingShown)
    assert.are.equal("done", out.result.state)
    assert.truthy(out.result.text:find("Lua scripts as MCP servers.", 1, true), out.result.text)
    for _, name in ipairs { "inspect-stdio-lists", "inspect-stdio-sampling", "inspect-stdio-result" } do assert_png(ARTIFACTS .. "/" .. name .. ".png") end
  end)

  it("inspect --ui --http of the official TypeScript SDK's Streamable HTTP example", function()
    local why = missing()
    if why then return pending(why) end
    local port = free_port()
    local stdout, stderr = uv.new_pipe(false), uv.new_pipe(false)
    local said, exited = "", false
    local env = { "MCP_PORT=" .. port, "PATH=" .. (os.getenv("PATH") or "/usr/bin:/bin"), "HOME=" .. (os.getenv("HOME") or "/tmp") }
    local handle = assert(uv.spawn(NODE, { args = { EXAMPLES .. "/simpleStreamableHttp.js" }, env = env, stdio = { nil, stdout, stderr } },
      function() exited = true end))
    local server = { pid = handle:get_pid() }
    function server.terminate() if not exited then handle:kill("sigkill") end client.wait_until(function() return exited end, 5000) end
    function server.close() for _, h in ipairs { stdout, stderr, handle } do if not h:is_closing() then h:close() end end uv.run("nowait") end
    reaper.track(server)
    stdout:read_start(function(_, d) if d then said = said .. d end end)
    stderr:read_start(function(_, d) if d then said = said .. d end end)
    local ok, err = pcall(function()
      assert(client.wait_until(function() return said:find("listening on port", 1, true) or exited end, WAIT) and not exited,
        "the SDK's example did not start:\n" .. said)
      local url
      proc, url = start_ui { "inspect", "--ui", "--http", "http://127.0.0.1:" .. port .. "/mcp" }
      local out = drive(url, "inspect", { name = "http", tool = "greet", args = { name = "luamcp" } })
      assert.is_nil(out.error, out.error)
      assert.truthy(table.concat(out.toolNames, " "):find("greet", 1, true))
      assert.are.equal("done", out.result.state)
      assert.truthy(out.result.text:find("Hello, luamcp!", 1, true), out.result.text)
      for _, name in ipairs { "inspect-http-lists", "inspect-http-result" } do assert_png(ARTIFACTS .. "/" .. name .. ".png") end
    end)
    server.terminate()
    server.close()
    assert(ok, err)
  end)
  it("dev --ui in Chromium with 100,000 messages in the timeline: only a window drawn, Home/End, a filter, still answering", function()
    local why = missing()
    if why then return pending(why) end
    dir = copy_demo()
    local url
    proc, url = start_ui { "dev", dir, "--ui" }
    proc:initialize()
    -- 50,000 calls (100,000 messages) from the stdio client, pipelined: a
    -- chunk of requests written at once, then their answers read.
    local CALLS, CHUNK = 50000, 2500
    local last_id
    for start = 0, CALLS - 1, CHUNK do
      local lines = {}
      for k = start, start + CHUNK - 1 do
        last_id = math.tointeger(proc.next_id)
        proc.next_id = last_id + 1
        lines[#lines + 1] = cjson.encode { jsonrpc = "2.0", id = last_id, method = "tools/call", params = { name = "add", arguments = { a = k, b = 1 } } }
      end
      proc:write(table.concat(lines, "\n") .. "\n")
      assert(client.wait_until(function() return #proc.lines >= CHUNK end, WAIT), "answers missing: " .. #proc.lines .. "\n" .. proc.stderr)
      local final = cjson.decode(proc.lines[CHUNK])
      assert(final.result and final.result.content, proc.lines[CHUNK])
      proc.lines = {}
    end

    local out = drive(url, "big", { calls = CALLS, lastId = last_id })
    assert.is_nil(out.error, out.error)
    assert.are.same({}, out.problems)
    -- every call a row, the count says so
    local shown, total = table.unpack(numbers(out.count))
    assert.is_true(shown >= CALLS and shown == total, out.count)
    -- only a window of rows in the DOM, wherever the list is scrolled
    for _, n in ipairs { out.domRows, out.domRowsAtHome, out.domRowsAtEnd } do
      assert.is_true(n > 5 and n < 300, "rows drawn: " .. n)
    end
    -- Home: the oldest row luamcp kept (its history keeps the newest
    -- 100,000 events: the first few calls at most are gone)
    assert.are.equal("0", out.first.pos)
    assert.are.equal("stdio", out.first.conn)
    assert.is_true(tonumber(out.first.id) <= 10, cjson.encode(out.first))
    -- End: the newest row, the page's own
    assert.are.equal(("%d"):format(out.shown - 1), out.last.pos)
    assert.are.equal("ui", out.last.conn)
    -- the id filter finds the last stdio call, paired
    assert.truthy(out.filteredCount:find("^1 of "), out.filteredCount)
    assert.are.equal(tostring(last_id), out.filtered[1].id)
    assert.are.equal("true", out.filtered[1].paired)
    assert.are.equal("stdio", out.filtered[1].conn)
    assert.truthy(out.filtered[1].text:find(tostring(CALLS), 1, true), out.filtered[1].text)
    -- and the page still answers a call
    assert.are.equal("done", out.add.state)
    assert.truthy(out.add.text:find("15", 1, true), out.add.text)
    assert_png(ARTIFACTS .. "/timeline-100k.png")
  end)

  it("dev --ui in Chromium: progress and cancel, every kind of result, resources, prompts, completions, roots, keys only, the 2026-07-28 era and tasks", function()
    local why = missing()
    if why then return pending(why) end
    dir = copy_demo_and_fixtures()
    local url
    proc, url = start_ui { "dev", dir, "--ui" }
    local out = drive(url, "features", { dir = dir })
    assert.is_nil(out.error, out.error)
    assert.are.same({}, out.problems)
    -- progress: a bar whose value grows, then cancel
    assert.is_true(out.progress[2].value > out.progress[1].value, cjson.encode(out.progress))
    assert.are.equal(50, out.progress[2].max)
    assert.are.equal("cancelled", out.cancelled.state)
    assert.truthy(out.cancelled.text:find("cancelled", 1, true), out.cancelled.text)
    assert.is_true(out.callEnabledAfterCancel, "the form can call again after a cancel")
    assert.truthy(out.cancelDetail:find("notifications/cancelled", 1, true), out.cancelDetail)
    -- every kind of result
    assert.are.equal("done", out.media.state)
    assert.truthy(out.mediaShown.img:find("^data:image/png;base64,"), out.mediaShown.img)
    assert.is_true(out.mediaShown.imgLoaded, "the image decodes")
    assert.truthy(out.mediaShown.audio:find("^data:audio/wav;base64,"), out.mediaShown.audio)
    assert.truthy(out.mediaShown.link:find("notes://welcome", 1, true), out.mediaShown.link)
    assert.truthy(out.mediaShown.structured:find('"label": "orange square"', 1, true), out.mediaShown.structured)
    assert.truthy(out.linkOpened:find("Welcome to luamcp", 1, true), out.linkOpened)
    -- resources, templates, prompts, completions
    assert.truthy(out.index:find("welcome", 1, true), out.index)
    assert.are.same({ "welcome" }, out.templateSuggestions)
    assert.truthy(out.note:find("Welcome to luamcp", 1, true), out.note)
    assert.are.same({ "welcome" }, out.promptSuggestions)
    assert.truthy(out.prompt:find("Summarize the note above", 1, true), out.prompt)
    assert.truthy(out.prompt:find("Welcome to luamcp", 1, true), out.prompt)
    -- roots
    assert.are.same({ "file:///tmp/project" }, out.rootsShown)
    assert.is_true(#out.rootsChanged >= 1)
    assert.are.equal("done", out.roots.state)
    assert.truthy(out.roots.text:find("roots: file:///tmp/project", 1, true), out.roots.text)
    assert.are.equal("s2c", out.rootsListRows[1].dir)
    -- keys only: arrows move between the tabs (and wrap), Tab/Space/Enter answer
    local want = { "tab-resources", "tab-prompts", "tab-roots", "tab-tools", "tab-roots" }
    for i, t in ipairs(out.keyTabs) do
      assert.are.equal(want[i], t.focused)
      assert.are.equal(want[i], t.selected)
      assert.are.equal(want[i]:gsub("^tab", "pane"), t.visible)
    end
    assert.is_true(out.keyReachedDelete)
    assert.are.equal("/confirm", out.keyQuestionFocus)
    assert.are.equal("q-accept", out.keyAcceptFocus)
    assert.truthy(out.keyDeleted:find("deleted welcome", 1, true), out.keyDeleted)
    assert.are_not.equal("body", out.focusAfterQuestion)
    -- the 2026-07-28 era
    assert.are.equal("done", out.add2026.state)
    assert.truthy(out.add2026.text:find("5", 1, true), out.add2026.text)
    assert.is_true(#out.add2026Rows >= 1)
    -- not ticked "run as a task": an ordinary call, even when it takes long
    assert.are.equal("done", out.reportPlain.state)
    assert.truthy(out.reportPlain.text:find("2. Section 2 of 2", 1, true), out.reportPlain.text)
    assert.is_false(out.reportPlainWasTask)
    -- the task: working, then completed, with its result
    assert.truthy(out.taskWorking:find("working", 1, true), out.taskWorking)
    assert.are.equal("done", out.task.state)
    assert.truthy(out.task.text:find("3. Section 3 of 3 about luamcp.", 1, true), out.task.text)
    assert.truthy(out.task.history:find("^working .*completed$"), out.task.history)
    assert.is_true(out.taskRows >= 1)
    -- a new connection in this era: server/discover, no initialize after the switch
    local first_2026 = math.huge
    for _, d in ipairs(out.discovers) do first_2026 = math.min(first_2026, d.seq) end
    assert.is_true(#out.discovers >= 2, cjson.encode(out.discovers))
    local initialize_after = {}
    for _, r in ipairs(out.initializes) do if r.method == "initialize" and r.seq > first_2026 then initialize_after[#initialize_after + 1] = r end end
    assert.are.same({}, initialize_after)
    for _, name in ipairs { "progress", "cancel", "media", "resources", "prompt", "roots", "keyboard-elicitation", "era-2026", "task-working", "task" } do
      assert_png(ARTIFACTS .. "/" .. name .. ".png")
    end
  end)
end)
