-- mcp.cli: luamcp's client commands, run by runtime/cli/client.c in a Lua
-- state of their own: call, read, prompt (an MCP client from the shell),
-- test (busted specs with mcp.testing) and init (a new project).

local core = require "luamcp.client"
local client = require "mcp.client"

local M = {}

local json = client.json

-- Colour on a terminal unless NO_COLOR is set to anything (no-color.org).
local function colour_on(fd)
  local no = os.getenv("NO_COLOR")
  return core.is_terminal(fd) and (no == nil or no == "")
end

-- text for fd, in colour code (nil: none). What a server sent is shown
-- with its control bytes written out (core.visible), never obeyed: an
-- escape sequence in a tool's text cannot set the terminal's title, clear
-- it or overwrite a line. Its lines and tabs are kept, since printing a
-- tool's text is what call is for.
local function paint(fd, code, text)
  text = core.visible(tostring(text))
  if not code or not colour_on(fd) then return text end
  return "\27[" .. code .. "m" .. text .. "\27[0m"
end

-- Every line for people goes through these two (and so through paint).
local function say(text, code) io.stderr:write(paint(2, code, text), "\n") end
local function show(text, code) io.stdout:write(paint(1, code, text), "\n") end

-- A command's failure: the message on stderr, exit status 1 (2: usage).
local Failure = {}
local function fail(message, status)
  error(setmetatable({ message = message, status = status or 1 }, Failure), 0)
end

---------------------------------------------------------------------------
-- JSON for people: indented, keys sorted
---------------------------------------------------------------------------

-- JSON text with no control byte left in it: DEL and the C1 controls too
-- as \u escapes (the same string to a JSON parser), so paint leaves --raw
-- output valid JSON while no byte of it can act on a terminal.
local function json_text(value)
  return (json.encode(value):gsub("\127", "\\u007f"):gsub("\194([\128-\159])", function(c)
    return ("\\u%04x"):format(c:byte())
  end))
end

local function pretty(value, indent)
  indent = indent or ""
  if type(value) ~= "table" then return json_text(value) end
  local inner = indent .. "  "
  local parts = {}
  if client.is_array(value) or (next(value) ~= nil and #value > 0 and next(value, #value) == nil) then
    if #value == 0 then return "[]" end
    for i, v in ipairs(value) do
      parts[i] = inner .. pretty(v, inner)
    end
    return "[\n" .. table.concat(parts, ",\n") .. "\n" .. indent .. "]"
  end
  local keys = {}
  for k in pairs(value) do
    keys[#keys + 1] = tostring(k)
  end
  if #keys == 0 then return "{}" end
  table.sort(keys)
  for i, k in ipairs(keys) do
    parts[i] = inner .. json_text(k) .. ": " .. pretty(value[k], inner)
  end
  return "{\n" .. table.concat(parts, ",\n") .. "\n" .. indent .. "}"
end
M.pretty = pretty

---------------------------------------------------------------------------
-- Arguments
---------------------------------------------------------------------------

local USAGE = {
  call = [==[
Usage: luamcp call PATH [TOOL [key=value ... | --json '{...}']]
       luamcp call --http URL [--header 'Name: value'] [TOOL ...]
       luamcp call --ws ws://HOST:PORT/mcp [TOOL ...]
       luamcp call [TOOL ...] -- COMMAND [ARG...]
  Call a tool and print what it returns: its content, its structured
  content, or its error (exit status 1). Log and progress notifications
  go to stderr as they come. Without TOOL, list the tools.

  PATH is a script file or folder, served in this process as `luamcp run`
  serves it (or a program made by `luamcp build`); --http reaches any
  Streamable HTTP server; after --, COMMAND is any stdio MCP server.

  key=value   an argument, typed by the tool's input schema: n=3 is the
              integer 3 where the schema says integer, the string "3" where
              it says string; arrays and objects are JSON (tags='["a","b"]'
              or tags=a,b); without a schema type, JSON if it parses
  --json JSON all the arguments as one JSON object
  --raw       print the whole result as JSON (without TOOL: the tools)
  --timeout MS how long to wait for the answer (default 60000)
]==] .. [==[
  --http URL  the Streamable HTTP server at URL; an error status is
              reported with what the server said and its WWW-Authenticate
  --ws URL    the server's WebSocket at URL (ws:// or wss://, subprotocol mcp)
  --bearer-env VAR  send the token in $VAR as 'Authorization: Bearer ...'
  OAuth: on the server's 401, luamcp finds the authorization server
  (WWW-Authenticate, Protected Resource Metadata, RFC 8414 / OpenID
  metadata), gets a token and retries. A login kept by `luamcp login URL`
  is used (and refreshed); on a terminal, a server that asks for a login
  gets one in the browser, as luamcp login does (luamcp login --help);
  otherwise client credentials (a client registered beforehand):
  --headless  log in without a browser: follow the authorization address
              and read its redirect (machines, tests, the conformance
              suite); nothing is kept
  --client-metadata-url URL  an https client ID metadata document to use
              as the client_id where the authorization server takes them
  --client-id ID   the client's id
  --client-secret-env VAR  its secret, from $VAR (client_secret_basic or
              client_secret_post, as the authorization server takes)
  --client-key FILE.pem  or its private key, for private_key_jwt
  --client-key-alg ES256|RS256  how the key signs (default ES256)
  --assertion-env VAR  a JWT the workload holds (a CI or cluster OIDC
              token), in $VAR: the JWT bearer grant (RFC 7523) instead,
              --client-id optional
  --id-token-env VAR --idp-issuer URL [--idp-client-id ID]  enterprise-
              managed authorization: the ID token in $VAR is exchanged at
              the identity provider for an ID-JAG (RFC 8693), which the
              JWT bearer grant presents (with --client-id's credentials)
  --scope 'S ...'  the scope to ask for (default: what the server's 401
              asks for, else all its Protected Resource Metadata lists)
  --issuer URL  the authorization server the credentials may go to; a
              server whose metadata names another is refused (without
              it, luamcp says on stderr where a secret or key goes)
  The OAuth options need an https URL (or http to a loopback host);
  --bearer-env over plain http elsewhere is sent, with a warning.
  --header 'Name: value'  send this header too (repeatable)
  --root DIR  answer the server's roots/list with DIR (repeatable)
  --answer key=value  answer a question the server asks (elicitation),
              typed by its schema (repeatable); without it the question
              is asked on the terminal, or cancelled when there is none
  --accept-defaults  with no terminal, accept a question with the --answer
              values and the schema's defaults for the rest
  --protocol-version V  speak only this version: 2026-07-28 (server/discover,
              no session) or 2025-11-25 and older (initialize). Without it,
              --http asks server/discover first and falls back to
              initialize for a server that does not know it; PATH and
              COMMAND servers are spoken to with initialize
  --listen    after the call (or instead of one: `luamcp call --http URL
              --listen`), print the server's notifications as they come
              until Ctrl-C (2026-07-28: subscriptions/listen; 2025: the
              session's GET stream)

  In the 2026-07-28 era every request carries its _meta and the
  MCP-Protocol-Version, Mcp-Method and Mcp-Name headers; a tool's
  x-mcp-header arguments go as Mcp-Param-* headers, and a tool whose
  x-mcp-header declarations are invalid is refused (not called). A result
  that needs input (input_required) is answered as questions are (--root,
  --answer, the terminal; sampling is refused) and the request sent again.
  An answer stream that closes early is resumed (GET with Last-Event-ID,
  after the server's retry delay). Ctrl-C during a call tells the server
  (notifications/cancelled) and exits with status 130.
]==],
  read = [==[
Usage: luamcp read PATH URI
       luamcp read --http URL URI     luamcp read URI -- COMMAND [ARG...]
  Read a resource and print its contents (text as it is; a binary blob as
  a line saying its type and size, or into a file with --output FILE).
  Without URI, list the resources and templates.
  --raw   print the whole result as JSON
  --http, --bearer-env, --client-id, --client-secret-env, --client-key,
  --client-key-alg, --assertion-env, --id-token-env, --idp-issuer,
  --idp-client-id, --scope, --issuer, --headless, --client-metadata-url,
  --header, --root, --answer, --accept-defaults, --protocol-version,
  --timeout: as for luamcp call
  (luamcp call --help)
]==],
  prompt = [==[
Usage: luamcp prompt PATH NAME [key=value ...]
       luamcp prompt --http URL NAME ...     luamcp prompt NAME ... -- COMMAND [ARG...]
  Get a prompt with its arguments and print its messages. Without NAME,
  list the prompts.
  --raw   print the whole result as JSON
  --http, --bearer-env, --client-id, --client-secret-env, --client-key,
  --client-key-alg, --assertion-env, --id-token-env, --idp-issuer,
  --idp-client-id, --scope, --issuer, --headless, --client-metadata-url,
  --header, --root, --answer, --accept-defaults, --protocol-version,
  --timeout: as for luamcp call
  (luamcp call --help)
]==],
  inspect = [==[
Usage: luamcp inspect PATH [--json]
       luamcp inspect --http URL [--header 'Name: value'] [--json]
       luamcp inspect [--json] -- COMMAND [ARG...]
       luamcp inspect --ui [--ui-port N] PATH | --http URL | -- COMMAND [ARG...]
  Print what a server serves: tools with their arguments, resources,
  templates, prompts. PATH (a script file or folder) is loaded in this
  process as `luamcp run` loads it and served to nobody but this command;
  what it mounts from other servers (mcp.mount) is listed too, and so are
  its permissions and when a tool becomes a task. --http and -- reach any
  server, as luamcp call does, and show what its lists say.
  --json   the wire entries clients get (tools/list and the others) as one
           JSON object
  --ui     open the web inspector instead of printing: a page on 127.0.0.1
           (address and token printed on stderr) that shows every message
           between it and the server live and calls tools from forms; PATH
           is served to the page alone and reloaded when a script changes
  --ui-port N  ... on this port (default: a free one)
  --http, --bearer-env, --client-id, --client-secret-env, --client-key,
  --client-key-alg, --assertion-env, --id-token-env, --idp-issuer,
  --idp-client-id, --scope, --issuer, --headless, --client-metadata-url,
  --header, --root, --answer, --accept-defaults, --protocol-version,
  --timeout: as for luamcp call
  (luamcp call --help)
]==],
  login = [==[
Usage: luamcp login URL [--client-id ID [--client-secret-env VAR]]
       luamcp login --status       luamcp logout URL
  Log in to the MCP server at URL as a person: luamcp finds its
  authorization server (the 401's WWW-Authenticate, Protected Resource
  Metadata, the server's metadata with its issuer checked), opens the
  authorization page in the browser ($BROWSER, else xdg-open, open or
  start; the address is printed too) and waits for the browser to come
  back to a listener on 127.0.0.1 that it opens for the login and closes
  after. The authorization-code grant with PKCE (S256), state, the
  resource indicator and the response's iss checked (RFC 9207); a
  DPoP-bound token (RFC 9449) where the authorization server takes it;
  offline_access asked for where offered, so the token is refreshed when
  it runs out.
  The token is kept for URL (and luamcp's registration for the
  authorization server) in $XDG_CONFIG_HOME/luamcp/tokens.json
  (~/.config/luamcp; %APPDATA%\luamcp on Windows, sealed there by the
  OS's data protection), readable by you alone, never printed. luamcp
  call, read, prompt and inspect --http URL then use it, and so does a
  tool's mcp.client.connect{url = URL}.
  The client: --client-id ID (registered beforehand; --client-secret-env
  VAR for a confidential one), else --client-metadata-url URL (an https
  client ID metadata document) where the authorization server takes
  those, else dynamic registration (RFC 7591) as a public client.
  --headless  follow the authorization address without a browser and read
              its redirect (an authorization server that lets a machine
              through; an error where it wants a person)
  --status    list the logins kept: server, authorization server, scope,
              expiry; no token or secret
  --scope, --issuer, --header, --timeout: as for luamcp call
  luamcp logout URL forgets the token kept for URL.
]==],
  logout = [==[
Usage: luamcp logout URL
  Forget the login kept for URL by luamcp login (and luamcp's registration
  at its authorization server, when no other login uses it).
]==],
  test = [==[
Usage: luamcp test [SPEC...] [busted options]
  Run busted specs (spec/ by default) inside the runtime, where
  require "mcp.testing" gives an in-process client for your server:

    local testing = require "mcp.testing"
    local t = testing.server(".")
    local r = t:call("add", { a = 1, b = 2 })
    assert.equal("3", testing.text(r))

  SPEC may be in another folder: `luamcp test hello/spec` runs in hello
  (the nearest folder holding a spec/ folder), as `cd hello && luamcp test`.
  Every busted option works ('luamcp test --help-busted' lists them).
  Needs busted for Lua 5.4 (Debian: apt install lua-busted; `make` installs it).
]==],
  init = [==[
Usage: luamcp init DIR [--name NAME]
  Start a new server in DIR (made if missing; it must be empty): server.lua
  with a tool, a resource and a prompt; spec/server_spec.lua testing them
  with mcp.testing; .luarc.json pointing your editor at luamcp's type
  definitions; and a README with the commands to run it, call it, test it
  and add it to a client.
]==],
}

-- Options that may be given more than once: o.root and o.answer are lists.
local REPEATABLE = { ["--root"] = true, ["--answer"] = true }

local function usage(command)
  return USAGE[command]
end

-- " (did you mean X?)" for the candidate (a set: name -> true) a mistyped
-- word most likely meant (mcp.check's rule), or "". mcp.check needs
-- mcp.core only for schemas, and the command line has no mcp.core: it
-- loads with an empty one lent for the moment.
local function did_you_mean(word, candidates)
  local lent = package.loaded["mcp.core"] == nil
  if lent then package.loaded["mcp.core"] = {} end
  local ok, check = pcall(require, "mcp.check")
  if lent then package.loaded["mcp.core"], package.loaded["mcp.check"] = nil, nil end
  local hint = ok and check.suggest(word, candidates) or nil
  return hint and (" (did you mean " .. hint .. "?)") or ""
end

-- Split a command line into the target (path, url with headers, or a
-- command), the options, and the positional words.
local function parse(command, args, flags)
  local o = { words = {}, headers = {} }
  local i = 1
  while i <= #args do
    local a = args[i]
    if a == "--" then
      o.command = table.move(args, i + 1, #args, 1, {})
      if #o.command == 0 then fail("luamcp " .. command .. ": nothing after --: give the server's command", 2) end
      break
    elseif a == "--help" or a == "-h" then
      o.help = true
    elseif a:sub(1, 2) == "--" and flags[a] ~= nil then
      if flags[a] then
        local v = args[i + 1]
        if v == nil then fail("luamcp " .. command .. ": " .. a .. " needs a value", 2) end
        if a == "--header" then
          local name, value = v:match("^([^:]+):%s*(.*)$")
          if not name then fail("luamcp " .. command .. ": --header needs 'Name: value'", 2) end
          o.headers[name] = value
        elseif REPEATABLE[a] then
          local list = o[a:sub(3)] or {}
          list[#list + 1] = v
          o[a:sub(3)] = list
        else
          o[a:sub(3)] = v
        end
        i = i + 1
      else
        o[a:sub(3)] = true
      end
    elseif a:sub(1, 2) == "--" then
      local known = { ["--help"] = true }
      for flag in pairs(flags) do known[flag] = true end
      fail("luamcp " .. command .. ": unknown option " .. a .. did_you_mean(a, known)
        .. "\nRun 'luamcp " .. command .. " --help' for usage.", 2)
    else
      o.words[#o.words + 1] = a
    end
    i = i + 1
  end
  return o
end

-- The options of call, read and prompt: which server, and how to print
-- (true: the option takes a value).
local CLIENT_FLAGS = {
  ["--http"] = true, ["--ws"] = true, ["--header"] = true, ["--bearer-env"] = true, ["--root"] = true, ["--answer"] = true,
  ["--timeout"] = true, ["--raw"] = false, ["--protocol-version"] = true, ["--accept-defaults"] = false,
  ["--client-id"] = true, ["--client-secret-env"] = true, ["--client-key"] = true, ["--client-key-alg"] = true,
  ["--scope"] = true, ["--assertion-env"] = true, ["--id-token-env"] = true, ["--idp-issuer"] = true,
  ["--idp-client-id"] = true, ["--issuer"] = true, ["--headless"] = false, ["--client-metadata-url"] = true,
}

local function print_notification(message, every)
  local p = message.params or {}
  if every and message.method ~= "notifications/message" and message.method ~= "notifications/progress" then
    -- --listen: every notification, one line each.
    say(tostring(message.method) .. (next(p) ~= nil and (" " .. json_text(p)) or ""), "2")
    return
  end
  if message.method == "notifications/message" then
    local data = type(p.data) == "string" and p.data or pretty(p.data)
    say(string.format("[%s]%s %s", tostring(p.level), p.logger and (" " .. p.logger .. ":") or "", data), "2")
  elseif message.method == "notifications/progress" then
    local total = p.total and ("/" .. tostring(p.total)) or ""
    say(string.format("progress %s%s%s", tostring(p.progress), total, p.message and ("  " .. p.message) or ""), "2")
  end
end

-- --root DIR: file:// URIs of the folders, as roots/list answers them.
local function roots_of(command, dirs)
  local roots = {}
  for _, dir in ipairs(dirs or {}) do
    if core.exists(dir) ~= "directory" then fail("luamcp " .. command .. ": --root " .. dir .. ": no such folder", 2) end
    local path = assert(core.realpath(dir))
    local uri = "file://" .. path:gsub("[^%w/%-%._~]", function(c) return ("%%%02X"):format(c:byte()) end)
    roots[#roots + 1] = { uri = uri, name = path:match("([^/]+)/*$") or path }
  end
  return roots
end

-- A secret from the environment variable the flag names (usage error
-- when unset or empty).
local function from_env(command, flag, var)
  local value = os.getenv(var)
  if value == nil or value == "" then
    fail(("luamcp %s: %s %s: the variable %s is %s"):format(command, flag, var, var,
      value == nil and "not set" or "empty"), 2)
  end
  return value
end

-- A URL given in a shell command, quoted for sh (or cmd's start).
local function shell_quoted(text)
  if package.config:sub(1, 1) == "\\" then return '"' .. text:gsub('"', "%%22") .. '"' end
  return "'" .. text:gsub("'", "'\\''") .. "'"
end

-- Open address in the user's browser: $BROWSER (a command; %s, if it has
-- one, is the address), else the desktop's opener (xdg-open where there
-- is a display, open on macOS, start on Windows). The address is printed
-- too, for a machine with no browser (ssh) or one that did not open.
local function open_browser(command, address)
  say(("luamcp %s: log in at this address (opening it in a browser):\n  %s"):format(command, address))
  local browser = os.getenv("BROWSER")
  local line
  if browser and browser ~= "" then
    line = browser:find("%s", 1, true) and browser:gsub("%%s", (shell_quoted(address):gsub("%%", "%%%%")))
      or (browser .. " " .. shell_quoted(address))
  elseif package.config:sub(1, 1) == "\\" then
    line = 'start "" ' .. shell_quoted(address)
  else
    local function on_path(name) return os.execute("command -v " .. name .. " >/dev/null 2>&1") == true end
    local uname = io.popen("uname -s 2>/dev/null")
    local system = uname and uname:read("l") or ""
    if uname then uname:close() end
    if system == "Darwin" then
      line = "open " .. shell_quoted(address)
    elseif (os.getenv("DISPLAY") or os.getenv("WAYLAND_DISPLAY")) and on_path("xdg-open") then
      line = "xdg-open " .. shell_quoted(address)
    end
  end
  if not line then return end
  -- In the background, and past the end of this terminal's session (a
  -- browser outlives the command that opened it).
  if package.config:sub(1, 1) ~= "\\" then line = "nohup " .. line .. " >/dev/null 2>&1 &" end
  os.execute(line)
end

-- The token kept for url by an earlier login (mcp.token_store), or nil.
local function kept_login(url)
  local store = require "mcp.token_store"
  local doc = store.load()
  return doc and doc.servers[store.key(url)] or nil, doc
end

-- Keep what a login got for url (and the registration, per issuer).
local function keep_login(command, url, kept)
  local store = require "mcp.token_store"
  local doc, why = store.load()
  if doc then
    doc.servers[store.key(url)] = kept
    -- luamcp's own registration there (not a client given with --client-id
    -- or a metadata document: those are not the authorization server's to keep).
    if kept.client and kept.client.registered and kept.issuer then
      doc.clients[kept.issuer] = kept.client
    end
    local ok
    ok, why = store.save(doc)
    if ok then return end
  end
  say(("luamcp %s: warning: the login is not kept: %s"):format(command, tostring(why)))
end

-- The OAuth options (--client-id with --client-secret-env or --client-key,
-- --assertion-env, --id-token-env) and the login (the authorization-code
-- grant: with --headless, with a terminal, or for luamcp login): an
-- authorize function for client.connect (mcp.client_auth), or nil when
-- there is nothing to authorize with. login: luamcp login itself (no kept
-- token is used; the new one is kept).
local function oauth_client(command, o, login)
  local given = o["client-id"] or o["client-secret-env"] or o["client-key"] or o["client-key-alg"] or o.scope
    or o["assertion-env"] or o["id-token-env"] or o["idp-issuer"] or o["idp-client-id"] or o.issuer
    or o["client-metadata-url"]
  local function usage_error(text) fail("luamcp " .. command .. ": " .. text, 2) end
  if (given or o.headless) and not o.http then
    usage_error("--client-id and the other OAuth options are for a server reached with --http URL")
  end
  if not o.http or o["bearer-env"] and not given then return nil end
  -- A person can log in: luamcp login, or a call on a terminal; a machine
  -- with --headless. A kept login is used unless --headless (a machine's
  -- run keeps nothing) or this is the login.
  local person = login or (core.is_terminal(0) and core.is_terminal(2))
  local can_login = (person or o.headless) and not o["assertion-env"] and not o["id-token-env"]
  local kept = (not o.headless and not login) and kept_login(o.http) or nil
  if not given and not can_login and not kept then return nil end
  local client_auth = require "mcp.client_auth"
  -- The token (and the metadata that leads to the credentials) would
  -- travel in the clear: OAuth 2.1 1.5.
  local allowed, why = client_auth.credentials_allowed(o.http)
  if not allowed then
    if not given and not login then return nil end
    usage_error(("the OAuth client options need an https URL or a loopback host, not %s: %s"
      .. " (the access token would go there)"):format(o.http, why))
  end
  for flag, what in pairs { issuer = "an authorization server", ["client-metadata-url"] = "a client ID metadata document" } do
    if o[flag] then
      allowed, why = client_auth.credentials_allowed(o[flag])
      if not allowed then
        usage_error(("--%s %s: %s is https (or http on a loopback host): %s"):format(flag, o[flag], what, why))
      end
    end
  end
  if o["bearer-env"] then usage_error("give either --bearer-env or OAuth client options, not both") end
  if not o["client-id"] and not o["assertion-env"] and not o["id-token-env"] and not can_login and not kept then
    usage_error("--client-secret-env, --client-key and --scope need --client-id ID (or --assertion-env VAR)")
  end
  local opts = { client_id = o["client-id"], scope = o.scope, issuer = o.issuer,
    client_metadata_url = o["client-metadata-url"],
    notice = function(text) say("luamcp " .. command .. ": " .. text) end }
  if o["assertion-env"] then opts.assertion = from_env(command, "--assertion-env", o["assertion-env"]) end
  if o["id-token-env"] or o["idp-issuer"] or o["idp-client-id"] then
    if not (o["id-token-env"] and o["idp-issuer"]) then usage_error("--id-token-env and --idp-issuer go together") end
    if opts.assertion then usage_error("give either --assertion-env or --id-token-env, not both") end
    opts.idp = { issuer = o["idp-issuer"], client_id = o["idp-client-id"],
      id_token = from_env(command, "--id-token-env", o["id-token-env"]) }
  end
  if (o["client-secret-env"] or o["client-key"]) and not o["client-id"] then
    usage_error("--client-secret-env and --client-key need --client-id ID")
  end
  if o["client-secret-env"] and o["client-key"] then
    usage_error("give either --client-secret-env or --client-key, not both")
  elseif o["client-secret-env"] then
    opts.client_secret = from_env(command, "--client-secret-env", o["client-secret-env"])
  elseif o["client-key"] then
    local file = o["client-key"]
    local f, err = io.open(file, "rb")
    if not f then usage_error("--client-key: " .. tostring(err)) end
    local pem = f:read(64 * 1024 + 1)
    f:close()
    if not pem or #pem > 64 * 1024 then usage_error("--client-key " .. file .. ": not a PEM key file (empty or over 64 KiB)") end
    opts.key_pem = pem
    opts.key_alg = o["client-key-alg"] or "ES256"
    if opts.key_alg ~= "ES256" and opts.key_alg ~= "RS256" then usage_error("--client-key-alg must be ES256 or RS256") end
  elseif o["client-id"] and not opts.assertion and not opts.idp and not can_login then
    usage_error("--client-id needs --client-secret-env VAR or --client-key FILE.pem, or a JWT with --assertion-env"
      .. " VAR; a public client logs in with luamcp login URL (or --headless)")
  end
  if o["client-key-alg"] and not o["client-key"] then usage_error("--client-key-alg goes with --client-key") end
  if can_login or kept then
    local _, doc = kept_login(o.http)
    local keep = login or not o.headless
    opts.login = {
      headless = o.headless,
      person = login, -- luamcp login: a person's login even with a client secret
      stored = kept,
      registrations = keep and doc and doc.clients or {},
      open = function(address) open_browser(command, address) end,
      say = function(text) say("luamcp " .. command .. ": " .. text) end,
      on_token = keep and function(token) keep_login(command, o.http, token) end or nil,
    }
    if not can_login then
      -- A kept token is used and refreshed, but a new login needs a person.
      opts.login.unattended = ("the login kept for %s no longer works and there is no terminal to log in again:"
        .. " run luamcp login %s"):format(o.http, o.http)
    end
  end
  return client_auth.new(opts)
end

-- Connect to what the options name; the first word is PATH unless --http
-- or -- named the server.
local function connect(command, o, login)
  local target = { headers = o.headers, on_notification = function(m) print_notification(m, o.listen) end }
  if o["bearer-env"] then
    local var = o["bearer-env"]
    local token = os.getenv(var)
    if token == nil or token == "" then
      fail(("luamcp %s: --bearer-env %s: the variable %s is %s"):format(command, var, var,
        token == nil and "not set" or "empty"), 2)
    end
    target.headers.Authorization = "Bearer " .. token
    local allowed, why = true, nil
    if o.http then allowed, why = require("mcp.client_auth").credentials_allowed(o.http) end
    if not allowed then
      say(("luamcp %s: warning: --bearer-env sends the token in the clear to %s (%s)"):format(command, o.http, why))
    end
  end
  if next(target.headers) ~= nil and not o.http and not o.ws then
    fail("luamcp " .. command .. ": --header and --bearer-env are for a server reached with --http URL", 2)
  end
  o.authorize = oauth_client(command, o, login)
  if o.authorize and o.authorize.current then
    -- A kept login's token goes with the first request (refreshed first
    -- when it ran out).
    local token, scheme = o.authorize.current()
    if token then target.headers.Authorization = (scheme or "Bearer") .. " " .. token end
  end
  if o.root then target.roots = roots_of(command, o.root) end
  target.elicit = require("mcp.cli_ask").elicitation(command, o.answer, fail, o["accept-defaults"])
  target.apply_defaults = true
  target.protocol_version = o["protocol-version"]
  -- The auth hook (lua/mcp/client_auth.lua adds its flags and sets it).
  target.authorize = o.authorize
  if o.timeout then
    target.timeout_ms = math.tointeger(tonumber(o.timeout))
    if not target.timeout_ms then fail("luamcp " .. command .. ": --timeout needs a whole number of ms", 2) end
  end
  if o.ws then
    if not o.ws:lower():match("^wss?://") then fail("luamcp " .. command .. ": --ws needs a ws:// URL", 2) end
    target.url = o.ws
  elseif o.http then
    target.url = o.http
  elseif o.command then
    target.command = o.command
  else
    local path = table.remove(o.words, 1)
    if not path then fail(usage(command), 2) end
    local kind = core.exists(path)
    if not kind then fail("luamcp " .. command .. ": no such file or folder: " .. path) end
    if kind == "file" and not path:match("%.lua$") then
      -- A program made by luamcp build (or any stdio server program).
      target.command = { path:find("/", 1, true) and path or ("./" .. path) }
    else
      target.path = path
    end
  end
  core.catch_interrupt()
  local c, err, why = client.connect(target)
  if not c then fail("luamcp " .. command .. ": " .. err, why == "interrupted" and 130 or 1) end
  return c
end

---------------------------------------------------------------------------
-- key=value, typed by a schema
---------------------------------------------------------------------------

local function schema_types(schema)
  local t = type(schema) == "table" and schema.type or nil
  if type(t) == "string" then return { t } end
  if type(t) == "table" then return t end
  return {}
end

local BOOLEANS = { ["true"] = true, ["false"] = false, yes = true, no = false, ["1"] = true, ["0"] = false }

local function typed(key, text, schema)
  local types = schema_types(schema)
  if #types == 0 then
    local v = json.decode(text)
    if v ~= nil then return v end
    return text
  end
  local wanted = {}
  for _, t in ipairs(types) do
    if t == "integer" then
      local n = math.tointeger(tonumber(text))
      if n then return n end
    elseif t == "number" then
      local n = tonumber(text)
      if n then return n end
    elseif t == "boolean" then
      if BOOLEANS[text] ~= nil then return BOOLEANS[text] end
    elseif t == "null" then
      if text == "null" then return client.null end
    elseif t == "array" or t == "object" then
      local v = json.decode(text)
      if type(v) == "table" and (t == "object") ~= client.is_array(v) then return v end
      if t == "array" and text:sub(1, 1) ~= "[" then
        local items = {}
        for part in (text .. ","):gmatch("(.-),") do
          items[#items + 1] = typed(key, part, type(schema) == "table" and schema.items or nil)
        end
        return json.array(items)
      end
    elseif t == "string" then
      return text
    end
    wanted[#wanted + 1] = t
  end
  fail(string.format("%s=%s: the schema wants %s", key, text, table.concat(wanted, " or ")), 2)
end
M.typed = typed

local function parse_arguments(o, schema)
  local args = {}
  if o.json then
    local v = json.decode(o.json)
    if type(v) ~= "table" or client.is_array(v) then fail("--json needs a JSON object", 2) end
    args = v
  end
  local properties = type(schema) == "table" and type(schema.properties) == "table" and schema.properties or nil
  for _, word in ipairs(o.words) do
    local key, text = word:match("^([^=]+)=(.*)$")
    if not key then fail(string.format("%s: arguments are key=value", word), 2) end
    local property = properties and properties[key]
    if properties and property == nil and schema.additionalProperties == false then
      local names = {}
      for name in pairs(properties) do
        names[#names + 1] = name
      end
      table.sort(names)
      fail(string.format("%s: no such argument (the arguments are: %s)", key, table.concat(names, ", ")), 2)
    end
    args[key] = typed(key, text, property)
  end
  return args
end

---------------------------------------------------------------------------
-- Printing results
---------------------------------------------------------------------------

local function same_json(a, b)
  return json.encode(a) == json.encode(b)
end

local function print_content(items, to)
  local write = to == "stderr" and say or show
  for _, item in ipairs(items or {}) do
    if item.type == "text" then
      write(item.text)
    elseif item.type == "image" or item.type == "audio" then
      write(string.format("[%s %s, %d bytes of base64]", item.type, tostring(item.mimeType), #(item.data or "")))
    elseif item.type == "resource_link" then
      write(string.format("[link %s%s]", tostring(item.uri), item.name and (" " .. item.name) or ""))
    elseif item.type == "resource" and type(item.resource) == "table" then
      local r = item.resource
      write(r.text or string.format("[resource %s, %s, %d bytes of base64]", tostring(r.uri), tostring(r.mimeType),
        #(r.blob or "")))
    else
      write(pretty(item))
    end
  end
end

local function print_structured(result)
  local s = result.structuredContent
  if s == nil then return end
  -- A tool that returns structured content also sends it as text: print
  -- it once.
  for _, item in ipairs(result.content or {}) do
    if item.type == "text" and same_json(json.decode(item.text), s) then return end
  end
  show(pretty(s))
end

-- hint: what to add to the server's message (" (did you mean X?)").
local function rpc_failure(command, err, hint)
  if err.interrupted then fail("luamcp " .. command .. ": interrupted; the server was told to cancel", 130) end
  local text = string.format("luamcp %s: %s%s", command, tostring(err.message), hint or "")
  if err.code and err.code ~= -32000 then text = text .. string.format(" (%s)", tostring(err.code)) end
  if err.data ~= nil then text = text .. "\n" .. pretty(err.data) end
  fail(text)
end

-- After the server refused a request for name (err): " (did you mean X?)"
-- when the server lists a near name, not name itself, among its kind
-- ("prompts", "resources"; key: the items' "name" or "uri"), else "". Not
-- after a transport failure or Ctrl-C (asking again would wait as long).
local function listed_hint(c, err, kind, key, name)
  if err.interrupted or err.code == nil or err.code == -32000 then return "" end
  local items = c:list(kind)
  if not items then return "" end
  local known = {}
  for _, item in ipairs(items) do
    known[tostring(item[key])] = true
  end
  return known[name] and "" or did_you_mean(name, known)
end

local function list_items(title, items, key, describe)
  if #items == 0 then return end
  show(title .. ":")
  local width = 0
  for _, item in ipairs(items) do
    width = math.max(width, #tostring(item[key]))
  end
  for _, item in ipairs(items) do
    local d = describe and describe(item) or item.description
    local name = tostring(item[key])
    io.stdout:write("  ", paint(1, nil, name), d and (string.rep(" ", width - #name + 2) .. paint(1, "2", (d:gsub("\n.*", "")))) or "", "\n")
  end
end

---------------------------------------------------------------------------
-- The commands
---------------------------------------------------------------------------

local commands = {}

-- The options of a client command (its own besides CLIENT_FLAGS), or nil
-- when it was asked for its usage, which is then printed.
local function client_options(command, args, own)
  local flags = {}
  for k, v in pairs(CLIENT_FLAGS) do flags[k] = v end
  for k, v in pairs(own or {}) do flags[k] = v end
  local o = parse(command, args, flags)
  if o.help then
    io.write(usage(command))
    return nil
  end
  return o
end

function commands.call(args)
  local o = client_options("call", args, { ["--json"] = true, ["--listen"] = false })
  if not o then return 0 end
  local c = connect("call", o)
  local name = table.remove(o.words, 1)
  local function listen()
    say("listening for the server's notifications (" .. tostring(c.protocol_version) .. "); Ctrl-C ends", "2")
    local ok, why, standalone = c:listen()
    c:close()
    if not ok then fail("luamcp call: " .. (standalone and "" or "the stream ended: ") .. tostring(why)) end
    return 0
  end
  if o.listen and not name then return listen() end
  local tools, err = c:list("tools")
  if not tools then rpc_failure("call", err) end
  if not name and o.raw then
    show(pretty(json.array(tools)))
    c:close()
    return 0
  end
  if not name then
    list_items("tools", tools, "name")
    if #tools == 0 then show("(no tools)") end
    c:close()
    return 0
  end
  local tool
  for _, t in ipairs(tools) do
    if t.name == name then tool = t end
  end
  if not tool then
    local names, known = {}, {}
    for i, t in ipairs(tools) do
      names[i] = t.name
      known[t.name] = true
    end
    fail(string.format("luamcp call: no tool %s%s; the tools are: %s", name, did_you_mean(name, known),
      table.concat(names, ", ")))
  end
  local result
  result, err = c:call(name, parse_arguments(o, tool.inputSchema))
  if not (result and o.listen) then c:close() end
  if not result then rpc_failure("call", err) end
  if o.raw then
    show(pretty(result))
  elseif result.isError then
    print_content(result.content, "stderr")
  else
    print_content(result.content)
    print_structured(result)
  end
  if o.listen then
    io.stdout:flush()
    listen()
  end
  return result.isError and 1 or 0
end

function commands.read(args)
  local o = client_options("read", args, { ["--output"] = true })
  if not o then return 0 end
  local c = connect("read", o)
  local uri = o.words[1]
  if not uri then
    local resources, err = c:list("resources")
    if not resources then rpc_failure("read", err) end
    local templates = c:list("resources/templates") or {}
    if o.raw then
      show(pretty({ resources = json.array(resources), resourceTemplates = json.array(templates) }))
      c:close()
      return 0
    end
    list_items("resources", resources, "uri")
    list_items("templates", templates, "uriTemplate")
    if #resources + #templates == 0 then show("(no resources)") end
    c:close()
    return 0
  end
  local result, err = c:read(uri)
  local hint = not result and listed_hint(c, err, "resources", "uri", uri)
  c:close()
  if not result then rpc_failure("read", err, hint) end
  if o.raw then
    show(pretty(result))
    return 0
  end
  for _, item in ipairs(result.contents or {}) do
    if item.text then
      io.write(core.visible(item.text), item.text:sub(-1) == "\n" and "" or "\n")
    elseif item.blob and o.output then
      local bytes = core.base64_decode(item.blob)
      local f = assert(io.open(o.output, "wb"))
      f:write(bytes)
      f:close()
      say(string.format("%s: %d bytes written to %s", tostring(item.uri), #bytes, o.output))
    else
      show(string.format("[blob %s, %s, %d bytes of base64; --output FILE writes it]", tostring(item.uri),
        tostring(item.mimeType), #(item.blob or "")))
    end
  end
  return 0
end

function commands.prompt(args)
  local o = client_options("prompt", args)
  if not o then return 0 end
  local c = connect("prompt", o)
  local name = table.remove(o.words, 1)
  if not name then
    local prompts, err = c:list("prompts")
    if not prompts then rpc_failure("prompt", err) end
    if o.raw then
      show(pretty(json.array(prompts)))
      c:close()
      return 0
    end
    list_items("prompts", prompts, "name")
    if #prompts == 0 then show("(no prompts)") end
    c:close()
    return 0
  end
  local arguments = {}
  for _, word in ipairs(o.words) do
    local key, value = word:match("^([^=]+)=(.*)$")
    if not key then fail(word .. ": arguments are key=value", 2) end
    arguments[key] = value -- prompt arguments are strings
  end
  local result, err = c:prompt(name, arguments)
  local hint = not result and listed_hint(c, err, "prompts", "name", name)
  c:close()
  if not result then rpc_failure("prompt", err, hint) end
  if o.raw then
    show(pretty(result))
    return 0
  end
  if result.description then show(result.description, "2") end
  for _, message in ipairs(result.messages or {}) do
    show(tostring(message.role) .. ":", "1")
    print_content({ message.content })
  end
  return 0
end

-- The lists luamcp inspect shows, by the capability that offers each.
local INSPECTED = {
  { "tools", "tools", "tools" }, { "resources", "resources", "resources" },
  { "resources/templates", "resourceTemplates", "resources" }, { "prompts", "prompts", "prompts" },
}

function commands.inspect(args)
  local flags = { ["--json"] = false }
  for k, v in pairs(CLIENT_FLAGS) do if k ~= "--raw" then flags[k] = v end end
  local o = parse("inspect", args, flags)
  if o.help then
    io.write(usage("inspect"))
    return 0
  end
  local extra = o.words[(o.http or o.ws or o.command) and 1 or 2]
  if extra then fail("luamcp inspect: unexpected " .. extra .. "\n" .. usage("inspect"), 2) end
  local c = connect("inspect", o)
  -- Every list is asked for, also from a folder served here: that is what
  -- fetches the lists of the servers it mounts.
  local view = { server = c.server_info, instructions = c.instructions }
  local caps = type(c.capabilities) == "table" and c.capabilities or {}
  for _, l in ipairs(INSPECTED) do
    local list = {}
    if caps[l[3]] ~= nil and caps[l[3]] ~= client.null then
      local err
      list, err = c:list(l[1])
      if not list then rpc_failure("inspect", err) end
    end
    view[l[2]] = json.array(list)
  end
  -- A folder served here describes itself, with what no list tells; any
  -- other server is shown as its lists say.
  local text, why = c:_inspect(o.json)
  c:close()
  if text == nil then fail("luamcp inspect: " .. tostring(why)) end
  if text == false then
    -- What another server's lists hold is shown, never obeyed (see paint).
    text = o.json and (json_text(view) .. "\n") or core.visible(require("mcp.inspect").text(view, json.encode))
  end
  io.write(text)
  return 0
end

-- `luamcp test --help-busted`: busted's options, on stdout. busted's own
-- --help reports its usage as a parse error (exit 1, on stderr, named after
-- the file that ran it), so ask its option parser directly.
local function busted_help()
  local ok, cli = pcall(require, "busted.modules.cli")
  if not ok then
    fail("luamcp test runs busted specs, and busted for Lua 5.4 is not installed (Debian: apt install lua-busted)")
  end
  cli = cli { standalone = false }
  cli:set_name("luamcp test")
  local _, usage = cli:parse { "--help" }
  usage = tostring(usage):gsub("^luamcp test: error: ", ""):gsub("; re%-run with %-%-help for usage%.%s*$", "")
  io.write(usage, usage:sub(-1) == "\n" and "" or "\n")
  return 0
end

function commands.test(args)
  if args[1] == "--help" or args[1] == "-h" then
    io.write(usage("test"))
    return 0
  end
  for _, a in ipairs(args) do
    if a == "--help-busted" then return busted_help() end
  end
  local ok, runner = pcall(require, "busted.runner")
  if not ok then
    fail("luamcp test runs busted specs, and busted for Lua 5.4 is not installed. Install it with\n"
      .. "  sudo apt-get install lua-busted          (Debian, Ubuntu; `make` in luamcp's source does it)\n"
      .. "  luarocks --lua-version 5.4 install busted\n"
      .. "(" .. tostring(runner):match("^[^\n]*") .. ")")
  end
  args = require("mcp.test_folder").busted_args(args)
  _G.arg = table.move(args, 1, #args, 1, { [0] = "luamcp test" })
  -- busted exits the process itself when a test fails.
  runner { standalone = false }
  return 0
end

function commands.init(args)
  local o = parse("init", args, { ["--name"] = true })
  if o.help then
    io.write(usage("init"))
    return 0
  end
  local dir = o.words[1]
  if not dir or o.words[2] then fail(usage("init"), 2) end
  return require("mcp.project").project(dir, o.name, fail)
end

function commands.login(args)
  local o = client_options("login", args, { ["--status"] = false })
  if not o then return 0 end
  local store = require "mcp.token_store"
  if o.status then
    local doc, why = store.load()
    if not doc then fail("luamcp login: " .. why) end
    local lines = store.status(doc, os.time())
    if #lines == 0 then show("no logins kept (" .. tostring(store.path()) .. ")") end
    for _, line in ipairs(lines) do show(line) end
    return 0
  end
  o.http = o.http or table.remove(o.words, 1)
  if not o.http or #o.words > 0 then fail(usage("login"), 2) end
  local c = connect("login", o, true)
  -- A server that lets the connection start without a token asks for one
  -- on its first request.
  local _, err = c:list("tools")
  c:close()
  if err then fail("luamcp login: " .. tostring(err.message)) end
  if not o.authorize.current() then
    say(("luamcp login: %s did not ask for a login (no HTTP 401): nothing to keep"):format(o.http))
    return 0
  end
  say(("luamcp login: logged in to %s; the token is kept in %s"):format(o.http, tostring(store.path())))
  return 0
end

function commands.logout(args)
  local o = client_options("logout", args, {})
  if not o then return 0 end
  local url = o.http or o.words[1]
  if not url or o.words[o.http and 1 or 2] then fail(usage("logout"), 2) end
  local store = require "mcp.token_store"
  local doc, why = store.load()
  if not doc then fail("luamcp logout: " .. why) end
  local key = store.key(url)
  local kept = doc.servers[key]
  if not kept then
    say("luamcp logout: no login kept for " .. key)
    return 0
  end
  doc.servers[key] = nil
  -- The registration at its authorization server goes too, unless another
  -- server's login still uses it.
  local used = false
  for _, other in pairs(doc.servers) do
    if other.issuer == kept.issuer then used = true end
  end
  if not used and kept.issuer then doc.clients[kept.issuer] = nil end
  local ok
  ok, why = store.save(doc)
  if not ok then fail("luamcp logout: " .. tostring(why)) end
  say("luamcp logout: forgot the login for " .. key)
  return 0
end

--- Run a command: its exit status.
function M.main(command, args)
  local ok, status = xpcall(commands[command], function(e)
    if getmetatable(e) == Failure then return e end
    return debug.traceback(tostring(e), 2)
  end, args)
  if ok then return status or 0 end
  if getmetatable(status) == Failure then
    say(status.message, "31")
    return status.status
  end
  say("luamcp " .. command .. ": " .. tostring(status))
  return 1
end

return M
