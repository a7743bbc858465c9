-- Agent Skills (the skills extension, io.modelcontextprotocol/skills): a
-- skills/ folder beside the scripts is listed with complete manifests
-- (SHA-256 of the bytes served), read through resources/read and
-- resources/directory/read; a broken SKILL.md is refused with its line;
-- mcp.skill serves a generated one; luamcp dev reloads a changed skill.
local client = require "spec.helpers.mcp_client"
local cjson = require "cjson"

local V = "2026-07-28"
local EMPTY = cjson.decode("{}")

local function with_meta(params)
  params = params or {}
  params._meta = {
    ["io.modelcontextprotocol/protocolVersion"] = V,
    ["io.modelcontextprotocol/clientCapabilities"] = EMPTY,
  }
  return params
end

local function sha256(path)
  local p = io.popen("sha256sum " .. path)
  local out = p:read("a")
  p:close()
  return out:match("^(%x+)")
end

local function make_skill(dir, name, front, files)
  client.sh("mkdir -p " .. dir .. "/skills/" .. name)
  client.write_file(dir .. "/skills/" .. name .. "/SKILL.md", front)
  for rel, text in pairs(files or {}) do
    client.sh("mkdir -p $(dirname " .. dir .. "/skills/" .. name .. "/" .. rel .. ")")
    client.write_file(dir .. "/skills/" .. name .. "/" .. rel, text)
  end
end

describe("skills", function()
  local dir
  before_each(function()
    dir = client.temp_dir()
    client.write_file(dir .. "/tools.lua", 'local mcp = require "mcp"\nmcp.tool { name = "t", handler = function() return 1 end }\n'
      .. 'mcp.skill { name = "generated", description = "Made by a function", frontmatter = { license = "MIT" },\n'
      .. '  read = function(path) if path == "SKILL.md" then return "---\\nname: generated\\ndescription: Made by a function\\nlicense: MIT\\n---\\nHi\\n" end end }\n')
    make_skill(dir, "deploy", "---\nname: deploy\ndescription: Ship it\nlicense: Apache-2.0\nmetadata:\n  version: \"1.2\"\n---\n# Deploy\n",
      { ["scripts/run.sh"] = "#!/bin/sh\necho go\n", ["notes.txt"] = "careful\n" })
  end)
  after_each(function() client.remove_tree(dir) end)

  it("lists a skills folder with front matter and a complete manifest, and serves its files", function()
    local server = client.spawn { "run", dir }
    local discover = server:request("server/discover", with_meta()).result
    assert.are.same({ directoryRead = true }, discover.capabilities.extensions["io.modelcontextprotocol/skills"])
    local list = server:request("skills/list", with_meta()).result
    assert.are.equal(2, #list.skills)
    local deploy = list.skills[1]
    assert.are.equal("skill://deploy/SKILL.md", deploy.uri)
    assert.are.same({ name = "deploy", description = "Ship it", license = "Apache-2.0", metadata = { version = "1.2" } },
      deploy.frontmatter)
    local uris = {}
    for _, r in ipairs(deploy.resources) do
      uris[#uris + 1] = r.uri
      local rel = r.uri:match("^skill://deploy/(.*)$")
      assert.are.equal("sha256:" .. sha256(dir .. "/skills/deploy/" .. rel), r.digest)
      assert.are.equal(#client.read_file(dir .. "/skills/deploy/" .. rel), r.size)
    end
    assert.are.same({ "skill://deploy/SKILL.md", "skill://deploy/notes.txt", "skill://deploy/scripts/run.sh" }, uris)
    assert.are.equal("dynamic", list.skills[2].resources)
    assert.are.equal("MIT", list.skills[2].frontmatter.license)
    assert.are.equal(0, list.ttlMs)
    local got = server:request("skills/get", with_meta({ uri = "skill://deploy/SKILL.md" })).result
    assert.are.same(deploy, got.skill)
    assert.is_nil(got.nextCursor)
    assert.are.equal(-32602, server:request("skills/get", with_meta({ uri = "skill://nope/SKILL.md" })).error.code)
    local read = server:request("resources/read", with_meta({ uri = "skill://deploy/SKILL.md" })).result
    assert.are.equal("text/markdown", read.contents[1].mimeType)
    assert.are.equal(client.read_file(dir .. "/skills/deploy/SKILL.md"), read.contents[1].text)
    local gen = server:request("resources/read", with_meta({ uri = "skill://generated/SKILL.md" })).result
    assert.truthy(gen.contents[1].text:find("name: generated", 1, true))
    local root = server:request("resources/directory/read", with_meta({ uri = "skill://deploy" })).result
    assert.are.same({ { uri = "skill://deploy/SKILL.md", name = "SKILL.md", mimeType = "text/markdown" },
      { uri = "skill://deploy/notes.txt", name = "notes.txt", mimeType = "text/plain" },
      { uri = "skill://deploy/scripts", name = "scripts", mimeType = "inode/directory" } }, root.resources)
    assert.are.equal(-32602,
      server:request("resources/directory/read", with_meta({ uri = "skill://deploy/SKILL.md" })).error.code)
    server:close()
  end)

  it("refuses a broken SKILL.md with its file and line", function()
    make_skill(dir, "broken", "---\nname: broken\ndescription: [unclosed\n---\n")
    local code, _, err = client.sh(client.LUAMCP .. " inspect " .. dir)
    assert.are_not.equal(0, code)
    assert.truthy(err:find("skills/broken/SKILL.md:4:", 1, true), err)
    client.remove_tree(dir .. "/skills/broken")
    make_skill(dir, "wrong", "---\nname: other\ndescription: Named wrong\n---\n")
    code, _, err = client.sh(client.LUAMCP .. " inspect " .. dir)
    assert.are_not.equal(0, code)
    assert.truthy(err:find('skills/wrong/SKILL.md:2: name "other" must be the skill\'s folder name, "wrong"', 1, true), err)
  end)

  it("reloads a changed skill under luamcp dev and tells listeners", function()
    local server = client.spawn { "dev", dir, "--log-level", "debug" }
    server:send({ jsonrpc = "2.0", id = "listen", method = "subscriptions/listen",
      params = with_meta({ notifications = { resourcesListChanged = true } }) })
    assert.are.equal("notifications/subscriptions/acknowledged", server:read().method)
    -- The skill's folder is watched once the server says so (debug log).
    assert.is_true(server:wait_stderr("watching " .. dir .. "/skills/deploy"), server.stderr)
    client.write_file(dir .. "/skills/deploy/notes.txt", "very careful\n")
    local size
    assert.is_true(client.wait_until(function()
      for _, r in ipairs(server:request("skills/get", with_meta({ uri = "skill://deploy/SKILL.md" })).result.skill.resources) do
        if r.uri == "skill://deploy/notes.txt" then size = r.size end
      end
      return size == #"very careful\n"
    end))
    assert.is_true(client.wait_until(function()
      server:request("skills/list", with_meta())
      return #server:notifications_named("notifications/resources/list_changed") > 0
    end), cjson.encode(server.notifications) .. server.stderr)
    server:close()
  end)
end)
