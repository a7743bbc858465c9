-- The caller's identity inside a server (issue #29), with mcp.testing
-- identities: they reach the core as a verified token's would
-- (transport_ops.request_identity), so what is checked here is what an
-- OAuth-protected HTTP server does. Run by `luamcp test --pattern=_test
-- spec/inprocess` (spec/run-all.sh) and by spec/auth_binding_spec.lua.
local testing = require "mcp.testing"

local FIXTURE = "spec/fixtures/auth_binding"
local TASKS = { extensions = { ["io.modelcontextprotocol/tasks"] = {} } }
local ALICE = { subject = "alice", client_id = "notes-app", scopes = { "notes:read", "notes:write" },
                expires_at = 4102444800, claims = { tenant = "acme" } }
local BOB = { subject = "bob", scopes = { "notes:read", "notes:write" } }
local READER = { subject = "carol", scopes = { "notes:read" } }
local NOBODY_SCOPES = { subject = "dave" }

local function code_of(ok, err)
  assert.is_false(ok)
  return err.code, err
end

describe("ctx.auth", function()
  it("is nil when nobody is authenticated", function()
    local t = testing.server(FIXTURE)
    assert.same({ anonymous = true }, t:call("whoami").structuredContent)
    assert.equal("anonymous", testing.text(t:call("tamper")))
    t:close()
  end)

  it("gives subject, client_id, scopes, expires_at and the claims in a 2025 session", function()
    local t = testing.server(FIXTURE, { auth = ALICE })
    local a = t:call("whoami").structuredContent
    assert.equal("alice", a.subject)
    assert.equal("notes-app", a.client_id)
    assert.same({ "notes:read", "notes:write" }, a.scopes)
    assert.equal(2, a.n_scopes)
    assert.equal(4102444800, a.expires_at)
    assert.equal("acme", a.claims.tenant)
    assert.equal("alice", a.claims.sub)
    assert.equal(testing.TESTING_ISSUER, a.claims.iss)
    assert.equal("notes:read notes:write", a.claims.scope)
    t:close()
  end)

  it("gives each 2026-07-28 request its own caller", function()
    local t = testing.server(FIXTURE)
    local a = t:request("tools/call", { name = "whoami" }, { modern = true, auth = BOB })
    assert.equal("complete", a.resultType)
    assert.equal("bob", a.structuredContent.subject)
    assert.is_nil(a.structuredContent.client_id)
    local c = t:request("tools/call", { name = "whoami" },
      { modern = true, auth = { client_id = "robot", scopes = "a b" } })
    assert.equal("robot", c.structuredContent.client_id)
    assert.is_nil(c.structuredContent.subject)
    assert.same({ "a", "b" }, c.structuredContent.scopes)
    local none = t:request("tools/call", { name = "whoami" }, { modern = true })
    assert.is_true(none.structuredContent.anonymous)
    t:close()
  end)

  it("is read-only, and never holds a token", function()
    local t = testing.server(FIXTURE, { auth = ALICE })
    local r = t:call("tamper").structuredContent
    assert.is_false(r.changed)
    assert.equal("alice", r.subject)
    assert.equal("notes:read", r.first_scope)
    assert.truthy(r.message:find("read-only", 1, true), r.message)
    local a = t:call("whoami").structuredContent
    for k in pairs(a.claims) do assert.is_nil(k:lower():find("token"), k) end
    t:close()
  end)

  it("encodes as what it shows (a tool may return it), and stays whole when marked", function()
    local t = testing.server(FIXTURE, { auth = ALICE })
    local r = t:call("auth_as_is").structuredContent
    assert.equal("alice", r.auth.subject)
    assert.same({ "notes:read", "notes:write" }, r.auth.scopes)
    assert.equal("acme", r.auth.claims.tenant)
    assert.same(r.auth, r.copy)
    assert.equal("alice", r.still)
    assert.equal('["notes:read","notes:write"]', r.text)
    t:close()
  end)

  it("refuses a malformed identity in the test, naming the field", function()
    local t = testing.server(FIXTURE)
    local ok, err = pcall(t.call, t, "whoami", {}, { auth = { scopes = { "x" } } })
    assert.is_false(ok)
    assert.truthy(tostring(err):find("subject or a client_id", 1, true), tostring(err))
    ok, err = pcall(t.call, t, "whoami", {}, { auth = { subject = "a", scope = "x" } })
    assert.is_false(ok)
    assert.truthy(tostring(err):find("unknown field scope", 1, true), tostring(err))
    t:close()
  end)

  it("will not let one 2025 session speak for another caller", function()
    local t = testing.server(FIXTURE, { auth = ALICE })
    local ok, err = pcall(t.call, t, "whoami", {}, { auth = BOB })
    assert.is_false(ok)
    assert.truthy(tostring(err):find("belongs to", 1, true), tostring(err))
    -- The same caller with other scopes (a stepped-up token) is the same session's.
    local a = t:call("whoami", {}, { auth = { subject = "alice", client_id = "notes-app", scopes = { "more" } } })
    assert.same({ "more" }, a.structuredContent.scopes)
    t:close()
  end)
end)

describe("scopes on primitives", function()
  it("refuses a tool call without them before the handler runs, and lists the tool to everyone", function()
    local t = testing.server(FIXTURE, { auth = READER })
    assert.truthy(t:tools().write_note)
    local code, err = code_of(pcall(t.call, t, "write_note", { text = "x" }))
    assert.equal(-32003, code)
    assert.same({ "notes:write" }, err.data.requiredScopes)
    -- Invalid arguments too: the scopes come first.
    code = code_of(pcall(t.call, t, "write_note", { text = 5 }))
    assert.equal(-32003, code)
    assert.equal("0", testing.text(t:call("written")))
    -- The same in the 2026-07-28 era, and for a tool that runs as a task:
    -- refused before a task is made.
    local none, e = t:request("tools/call", { name = "write_note" }, { modern = true, auth = READER })
    assert.is_nil(none)
    assert.equal(-32003, e.code)
    none, e = t:request("tools/call", { name = "write_task" }, { modern = true, auth = READER, capabilities = TASKS })
    assert.is_nil(none)
    assert.equal(-32003, e.code)
    assert.equal("0", testing.text(t:call("written")))
    -- A caller with the scope gets through.
    assert.equal("written", testing.text(t:call("write_note", { text = "x" }, { auth = READER.subject and
      { subject = "carol", scopes = { "notes:read", "notes:write" } } })))
    assert.equal("1", testing.text(t:call("written")))
    t:close()
  end)

  it("refuses reads, prompts and completions without them, before anything runs", function()
    local t = testing.server(FIXTURE, { auth = NOBODY_SCOPES })
    assert.truthy(t:resources()["notes://secret"])
    assert.truthy(t:templates()["notes://by/{name}"])
    assert.truthy(t:prompts().summarize)
    local code, err = code_of(pcall(t.read, t, "notes://secret"))
    assert.equal(-32003, code)
    assert.same({ "notes:read" }, err.data.requiredScopes)
    assert.equal(-32003, (code_of(pcall(t.read, t, "notes://by/x"))))
    assert.equal(-32003, (code_of(pcall(t.prompt, t, "summarize", { topic = "a" }))))
    assert.equal(-32003, (code_of(pcall(t.complete, t, { type = "ref/prompt", name = "summarize" },
      { name = "topic", value = "" }))))
    assert.equal(-32003, (code_of(pcall(t.complete, t, { type = "ref/resource", uri = "notes://by/{name}" },
      { name = "name", value = "" }))))
    assert.equal("for everyone", testing.text(t:read("notes://public")))
    assert.equal("0", testing.text(t:call("reads")))
    -- With the scope.
    local reader = { auth = READER, modern = true }
    assert.equal("the secret", testing.text(t:read("notes://secret", reader)))
    assert.equal("note x", testing.text(t:read("notes://by/x", { auth = READER, modern = true })))
    t:close()
  end)

  it("are not enforced when nobody is authenticated (stdio, auth off)", function()
    local t = testing.server(FIXTURE)
    assert.equal("written", testing.text(t:call("write_note")))
    assert.equal("the secret", testing.text(t:read("notes://secret")))
    t:close()
  end)

  it("refuse resources/subscribe without the resource's scopes", function()
    local t = testing.server(FIXTURE, { auth = NOBODY_SCOPES })
    local code, err = code_of(pcall(t.subscribe, t, "notes://secret"))
    assert.equal(-32003, code)
    assert.same({ "notes:read" }, err.data.requiredScopes)
    assert.equal(-32003, (code_of(pcall(t.subscribe, t, "notes://by/x"))))
    assert.same({}, t:subscribe("notes://public"))
    t:close()
    t = testing.server(FIXTURE, { auth = READER })
    assert.same({}, t:subscribe("notes://secret"))
    t:close()
  end)
end)

describe("MCP tasks bound to their creator", function()
  local function start_job(t, who)
    local r = t:request("tools/call", { name = "job" }, { modern = true, capabilities = TASKS, auth = who })
    assert.equal("task", r.resultType, testing.json.encode(r))
    return r.taskId
  end
  local function tasks(t, method, params, who)
    return t:request(method, params, { modern = true, capabilities = TASKS, auth = who })
  end

  it("answer another caller as for an unknown task: get, update, cancel, result, listen", function()
    local t = testing.server(FIXTURE)
    local id = start_job(t, ALICE)
    local unknown = tasks(t, "tasks/get", { taskId = string.rep("0", 32) }, BOB) -- what an unknown id gets
    assert.is_nil(unknown)
    local _, want = tasks(t, "tasks/get", { taskId = string.rep("0", 32) }, BOB)
    for _, m in ipairs { "tasks/get", "tasks/cancel" } do
      local r, e = tasks(t, m, { taskId = id }, BOB)
      assert.is_nil(r, m)
      assert.same({ want.code, want.message }, { e.code, e.message }, m)
    end
    local r, e = tasks(t, "tasks/update", { taskId = id, inputResponses = {} }, BOB)
    assert.is_nil(r)
    assert.same({ want.code, want.message }, { e.code, e.message })
    -- Nobody authenticated is not alice either.
    assert.is_nil((tasks(t, "tasks/get", { taskId = id }, nil)))
    -- Listening: bob's filter drops alice's task, alice's keeps it.
    local agreed = t:listen({ taskIds = { id } }, { auth = BOB, capabilities = TASKS })
    assert.same({}, agreed.taskIds)
    local mine, listen_id = t:listen({ taskIds = { id } }, { auth = ALICE, capabilities = TASKS })
    assert.same({ id }, mine.taskIds)
    -- Still running for alice (bob's cancel did nothing).
    assert.equal("working", tasks(t, "tasks/get", { taskId = id }, ALICE).status)
    t:call("release")
    local got
    for _ = 1, 500 do
      got = tasks(t, "tasks/get", { taskId = id }, ALICE)
      if got.status ~= "working" then break end
      t:call("pause") -- lets the loop turn
    end
    assert.equal("completed", got.status)
    assert.equal("done for alice in task " .. id, testing.text(got.result))
    assert.is_nil((tasks(t, "tasks/get", { taskId = id }, BOB)))
    -- Alice's listener heard of it, bob's did not.
    local heard = {}
    for _, n in ipairs(t:received("notifications/tasks")) do
      heard[#heard + 1] = n.params._meta["io.modelcontextprotocol/subscriptionId"]
    end
    assert.truthy(#heard > 0)
    for _, sub in ipairs(heard) do assert.equal(listen_id, sub) end
    assert.same({ resultType = "complete" }, (tasks(t, "tasks/cancel", { taskId = id }, ALICE)))
    t:close()
  end)

  it("belong to the principal, not to one token: the same caller with other scopes keeps them", function()
    local t = testing.server(FIXTURE)
    local id = start_job(t, ALICE)
    local r = tasks(t, "tasks/get", { taskId = id }, { subject = "alice", scopes = { "other" } })
    assert.equal(id, r.taskId)
    -- Another issuer's alice is another caller.
    assert.is_nil((tasks(t, "tasks/get", { taskId = id }, { subject = "alice", issuer = "https://elsewhere" })))
    t:call("release")
    t:close()
  end)
end)

describe("requestState bound to the caller", function()
  it("opens only for the caller it was issued to", function()
    local t = testing.server(FIXTURE)
    local modern = { modern = true, auth = ALICE, capabilities = { elicitation = {} } }
    local r1 = t:request("tools/call", { name = "greet" }, modern)
    assert.equal("input_required", r1.resultType)
    local key = next(r1.inputRequests)
    local retry = { name = "greet", requestState = r1.requestState,
                    inputResponses = { [key] = { action = "accept", content = { name = "Ann" } } } }
    local stolen, err = t:request("tools/call", retry, { modern = true, auth = BOB, capabilities = { elicitation = {} } })
    assert.is_nil(stolen)
    assert.equal(-32602, err.code)
    assert.truthy(err.message:find("another request or caller", 1, true), err.message)
    -- Nobody authenticated cannot use it either; alice can.
    assert.is_nil((t:request("tools/call", retry, { modern = true, capabilities = { elicitation = {} } })))
    local ok = t:request("tools/call", retry, modern)
    assert.equal("hello Ann", testing.text(ok))
    t:close()
  end)
end)
