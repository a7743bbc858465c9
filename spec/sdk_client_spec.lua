-- The official TypeScript SDK (pinned in spec/package.json) as a real
-- client of the example server over stdio.

local client = require "mcp_client"
local run_node = require("node_runner").run

describe("the official TypeScript SDK client over stdio", function()
  local r
  setup(function()
    local luamcp = io.popen("readlink -f " .. client.LUAMCP):read("l")
    r = run_node { "spec/clients/sdk_stdio_demo.mjs", luamcp, "scripts/demo" }
  end)

  it("connects and initializes", function()
    assert.is_nil(r.error)
    assert.is_true(r.ok)
    assert.are.equal("demo", r.serverVersion.name)
    assert.is_table(r.capabilities.tools)
    assert.truthy(r.instructions:find("demo", 1, true))
  end)

  it("lists and calls tools", function()
    local names = {}
    for _, t in ipairs(r.tools.tools) do names[t.name] = true end
    assert.is_true(names.add and names.roll_dice and names.countdown and names.write_note)
    assert.are.same({ { type = "text", text = "5" } }, r.add.content)
    assert.are.equal(2, #r.dice.structuredContent.rolls)
    assert.are.equal("Liftoff!", r.countdown.content[1].text)
    assert.are.equal(3, #r.progress)
  end)

  it("reads a resource and a template", function()
    assert.are.equal("welcome", r.index.contents[1].text)
    assert.are.equal("notes://{name}", r.templates.resourceTemplates[1].uriTemplate)
    assert.truthy(r.welcome.contents[1].text:find("Welcome", 1, true))
    assert.are.equal(-32002, r.missing.code)
  end)

  it("gets a prompt and completes its argument", function()
    assert.are.equal("summarize_note", r.prompts.prompts[1].name)
    assert.are.equal(2, #r.prompt.messages)
    assert.are.equal("resource", r.prompt.messages[1].content.type)
    assert.are.same({ "welcome" }, r.complete.completion.values)
  end)
end)
