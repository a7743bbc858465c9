-- mcp.client_auth: luamcp call as an OAuth client, for what a shell client
-- can do without a browser: the client credentials grant (RFC 6749 4.4)
-- with a pre-registered client, authenticated by client_secret_basic,
-- client_secret_post or private_key_jwt (RFC 7523), or the JWT bearer grant
-- (RFC 7523 2.1) with a JWT the workload holds (workload identity
-- federation: a CI or cluster OIDC token), or an enterprise identity
-- provider's ID token exchanged there for an ID-JAG (RFC 8693 token
-- exchange; MCP's enterprise-managed authorization) that the JWT bearer
-- grant then presents. The interactive flows
-- (authorization code with a browser, dynamic registration) are not here.
--
-- Everything is found from the MCP server's 401, as the MCP authorization
-- spec (2025-11-25) says:
--   WWW-Authenticate: Bearer resource_metadata="...", scope="..."
--   -> Protected Resource Metadata (RFC 9728; the challenge's URL, else the
--      well-known paths) -> its authorization server's metadata (RFC 8414
--      or OpenID Connect Discovery, with the spec's path insertion)
--   -> the token endpoint: grant_type=client_credentials, resource (RFC
--      8707), scope.
--
--   local auth = require "mcp.client_auth"
--   local authorize = auth.new { client_id = "id", client_secret = "s" }
--   local token, err = authorize { status = 401, challenge = "Bearer ...", url = "http://host/mcp" }
--
-- The token is kept for the connection; a second 401 once a token was
-- given is a failure (never a loop), unless the token's expires_in has
-- passed (then a new one is fetched). Neither the secret nor the token is
-- ever part of a message.

-- The command line's C half (luamcp.client), or in a server the same over
-- mcp.http (mcp.oauth_server_core: client credentials for mcp.client).
local has_client, core = pcall(require, "luamcp.client")
if not has_client then core = require "mcp.oauth_server_core" end

local M = {}

local JWT_BEARER = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
local JWT_BEARER_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
local TOKEN_EXCHANGE_GRANT = "urn:ietf:params:oauth:grant-type:token-exchange"
local ID_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id_token"
local ID_JAG_TYPE = "urn:ietf:params:oauth:token-type:id-jag"
-- How long a client assertion is valid (RFC 7523 3: short).
local ASSERTION_LIFETIME_S = 300

---------------------------------------------------------------------------
-- Small pieces (pure, tested through the spec)
---------------------------------------------------------------------------

--- The auth-params of a WWW-Authenticate header's Bearer (or DPoP) challenge:
--- { resource_metadata =, scope =, error =, error_description = } (names
--- lower case). Quoted values may hold commas and escaped quotes.
function M.parse_challenge(text)
  local params = {}
  if type(text) ~= "string" then return params end
  -- Bearer, or DPoP (RFC 9449 7.1: the same auth-params)
  local s = text:match("^%s*[Bb][Ee][Aa][Rr][Ee][Rr]%s+(.*)$") or text:match("^%s*[Dd][Pp][Oo][Pp]%s+(.*)$")
    or text:match("[Bb]earer%s+(.*)$") or text:match("[Dd][Pp][Oo][Pp]%s+(.*)$")
  if not s then return params end
  local i = 1
  while i <= #s do
    local name, after = s:match("^[%s,]*([%w_%-]+)%s*=%s*()", i)
    if not name then break end
    local value
    if s:sub(after, after) == '"' then
      local j, parts = after + 1, {}
      while j <= #s do
        local c = s:sub(j, j)
        if c == "\\" then
          parts[#parts + 1] = s:sub(j + 1, j + 1)
          j = j + 2
        elseif c == '"' then
          break
        else
          parts[#parts + 1] = c
          j = j + 1
        end
      end
      value, i = table.concat(parts), j + 1
    else
      value = s:match("^[^,%s]*", after)
      i = after + #value
    end
    params[name:lower()] = value
  end
  return params
end

-- The URL pieces and the canonical server URI (one place: mcp.token_store,
-- which keeps logins under it).
local token_store = require "mcp.token_store"
local split_url = token_store.split_url
M.split_url = split_url
M.canonical_url = token_store.canonical_url

--- The Protected Resource Metadata URLs to try for the server at url
--- (RFC 9728 3.1, MCP 2025-11-25): the path-aware one, then the root.
function M.resource_metadata_urls(url)
  local scheme, authority, path = split_url(url)
  if not scheme then return {} end
  local base = scheme .. "://" .. authority .. "/.well-known/oauth-protected-resource"
  path = path:gsub("/+$", "")
  if path == "" then return { base } end
  return { base .. path, base }
end

--- The authorization server metadata URLs to try for an issuer (MCP
--- 2025-11-25 "Authorization Server Metadata Discovery"), in order.
function M.server_metadata_urls(issuer)
  local scheme, authority, path = split_url(issuer)
  if not scheme then return {} end
  local origin = scheme .. "://" .. authority
  path = path:gsub("/+$", "")
  if path == "" then
    return { origin .. "/.well-known/oauth-authorization-server", origin .. "/.well-known/openid-configuration" }
  end
  return {
    origin .. "/.well-known/oauth-authorization-server" .. path,
    origin .. "/.well-known/openid-configuration" .. path,
    origin .. path .. "/.well-known/openid-configuration",
  }
end

--- May a PRM that names `resource` speak for the server at url? The same
--- origin, and the server's path inside the resource's (RFC 9728 3.3; the
--- TypeScript SDK's rule).
function M.resource_allowed(url, resource)
  local s1, a1, p1 = split_url(url)
  local s2, a2, p2 = split_url(resource)
  if not s1 or not s2 or s1 ~= s2 or a1 ~= a2 then return false end
  p1 = p1:gsub("/+$", "") .. "/"
  p2 = p2:gsub("/+$", "") .. "/"
  return p1:sub(1, #p2) == p2
end

--- May credentials go to url? https, or http on a loopback host (OAuth
--- 2.1 1.5: TLS everywhere else), judged on the host libcurl reads, the one
--- it connects to; a user name or password before the host is refused.
--- true, or false and why ("it ...", for after the URL).
function M.credentials_allowed(url)
  return core.credentials_allowed(tostring(url))
end

local function not_sending(endpoint, why)
  return ("not sending credentials to %s: %s"):format(endpoint, why)
end

-- application/x-www-form-urlencoded
local function form_escape(s)
  return (tostring(s):gsub("[^%w%-%._~]", function(c) return ("%%%02X"):format(c:byte()) end))
end

function M.form(fields)
  local parts = {}
  for _, kv in ipairs(fields) do
    if kv[2] ~= nil then parts[#parts + 1] = form_escape(kv[1]) .. "=" .. form_escape(kv[2]) end
  end
  return table.concat(parts, "&")
end
local form = M.form

-- The server's own words on one line (what prints them escapes the other
-- control bytes).
local function one_line(text) return (text:gsub("[\r\n]+", " ")) end

-- What an error answer says, for a person: "HTTP 401 invalid_client:
-- description", never more than a line of the body.
function M.describe(answer)
  local text = "HTTP " .. tostring(answer.status)
  local doc = core.json_decode(answer.body or "")
  if type(doc) == "table" and type(doc.error) == "string" then
    text = text .. " " .. one_line(doc.error:sub(1, 100))
    if type(doc.error_description) == "string" then text = text .. ": " .. one_line(doc.error_description:sub(1, 500)) end
  elseif answer.body and answer.body:match("%S") then
    text = text .. ": " .. one_line(answer.body:sub(1, 200)) .. (#answer.body > 200 and "..." or "")
  end
  return text
end
local describe = M.describe

-- GET a JSON document: the decoded object, or nil, why (and the status).
local function get_json(url)
  local answer, err = core.oauth_fetch { method = "GET", url = url, headers = { Accept = "application/json" } }
  if not answer then return nil, err end
  if answer.status ~= 200 then return nil, describe(answer), answer.status end
  local doc = core.json_decode(answer.body)
  if type(doc) ~= "table" then
    return nil, "HTTP 200 but the body is not a JSON object", 200
  end
  return doc
end

local function list_has(list, value)
  if type(list) ~= "table" then return false end
  for _, v in ipairs(list) do
    if v == value then return true end
  end
  return false
end

local function trim_slash(s) return (tostring(s):gsub("/+$", "")) end

---------------------------------------------------------------------------
-- The steps
---------------------------------------------------------------------------

-- Protected Resource Metadata: the document and the URL it came from, or
-- nil and why. tried: the URLs that answered nothing usable.
local function find_resource_metadata(url, challenge)
  local tried = {}
  local urls = challenge.resource_metadata and { challenge.resource_metadata } or M.resource_metadata_urls(url)
  for _, u in ipairs(urls) do
    local doc, why = get_json(u)
    if doc then return doc, u end
    tried[#tried + 1] = u .. " (" .. tostring(why) .. ")"
  end
  return nil, "no Protected Resource Metadata: " .. table.concat(tried, "; ")
end

-- The authorization server's metadata, or nil and why.
local function find_server_metadata(issuer)
  local tried = {}
  for _, u in ipairs(M.server_metadata_urls(issuer)) do
    local doc, why = get_json(u)
    if doc then
      -- RFC 8414 3.3: the document must name the issuer it was fetched
      -- for, or it may be anyone's (and its token_endpoint anywhere).
      if type(doc.issuer) ~= "string" then
        return nil, ("%s names no issuer (RFC 8414 3.3 wants %s): not sending credentials"):format(u, issuer)
      end
      if trim_slash(doc.issuer) ~= trim_slash(issuer) then
        return nil, ("%s names the issuer %s, not %s (RFC 8414 3.3): not sending credentials"):format(
          u, doc.issuer, issuer)
      end
      if type(doc.token_endpoint) ~= "string" then return nil, u .. " names no token_endpoint" end
      return doc, u
    end
    tried[#tried + 1] = u .. " (" .. tostring(why) .. ")"
  end
  return nil, "no authorization server metadata: " .. table.concat(tried, "; ")
end

--- How to authenticate at the token endpoint with opts (key_pem or
--- client_secret, or only an assertion) to the server (its metadata):
--- "private_key_jwt", "client_secret_basic", "client_secret_post", "none"
--- (a JWT bearer grant with no client secret: the assertion is the proof),
--- or nil and why.
function M.auth_method(opts, server)
  local supported = server.token_endpoint_auth_methods_supported
  if (opts.assertion or opts.idp) and not opts.key_pem and not opts.client_secret then return "none" end
  if opts.key_pem then
    if type(supported) == "table" and not list_has(supported, "private_key_jwt") then
      return nil, ("the authorization server does not take private_key_jwt (it takes %s)"):format(
        table.concat(supported, ", "))
    end
    return "private_key_jwt"
  end
  -- RFC 8414 2: without the list, client_secret_basic is the default.
  if type(supported) ~= "table" or list_has(supported, "client_secret_basic") then return "client_secret_basic" end
  if list_has(supported, "client_secret_post") then return "client_secret_post" end
  if list_has(supported, "private_key_jwt") then
    return nil, "the authorization server wants private_key_jwt: give the client's key with --client-key FILE.pem"
  end
  return nil, ("the authorization server takes none of client_secret_basic, client_secret_post or private_key_jwt"
    .. " (it takes %s)"):format(table.concat(supported, ", "))
end

-- A JWT client assertion (RFC 7523 2.2, 3).
local function client_assertion(opts, audience)
  local now = os.time()
  local header = core.json_encode { alg = opts.key_alg, typ = "JWT" }
  local claims = core.json_encode {
    iss = opts.client_id, sub = opts.client_id, aud = audience,
    iat = now, exp = now + ASSERTION_LIFETIME_S, jti = core.random_id(),
  }
  return core.jws_sign(opts.key_alg, opts.key_pem, header, claims)
end

-- Enterprise-managed authorization: the user's ID token from the identity
-- provider (opts.idp = {issuer, id_token, client_id}) exchanged there for
-- an ID-JAG for this authorization server and resource. The ID-JAG, or
-- nil and why.
local function exchange_id_token(idp, server, resource, scope)
  if not idp.token_endpoint then
    local meta, why = find_server_metadata(idp.issuer)
    if not meta then return nil, ("cannot find the identity provider %s: %s"):format(idp.issuer, why) end
    idp.token_endpoint = meta.token_endpoint
  end
  local endpoint = idp.token_endpoint
  local allowed, why = M.credentials_allowed(endpoint)
  if not allowed then return nil, not_sending(endpoint, why) end
  local answer, err = core.oauth_fetch { method = "POST", url = endpoint,
    headers = { ["Content-Type"] = "application/x-www-form-urlencoded", Accept = "application/json" },
    body = form {
      { "grant_type", TOKEN_EXCHANGE_GRANT }, { "requested_token_type", ID_JAG_TYPE },
      { "audience", server.issuer }, { "resource", resource }, { "scope", scope },
      { "subject_token", idp.id_token }, { "subject_token_type", ID_TOKEN_TYPE }, { "client_id", idp.client_id },
    } }
  if not answer then return nil, ("the token exchange at %s failed: %s"):format(endpoint, err) end
  if answer.status ~= 200 then
    return nil, ("the identity provider's token endpoint %s refused to exchange the ID token: %s"):format(endpoint,
      describe(answer))
  end
  local doc = core.json_decode(answer.body)
  if type(doc) ~= "table" or type(doc.access_token) ~= "string" or doc.access_token == ""
    or (doc.issued_token_type ~= nil and doc.issued_token_type ~= ID_JAG_TYPE) then
    return nil, ("the identity provider's token endpoint %s answered HTTP 200 without an ID-JAG"):format(endpoint)
  end
  return doc.access_token
end

--- The token endpoint's client authentication by method for client
--- ({client_id, client_secret | key_pem, key_alg}): headers and the form
--- fields to add ({name, value} pairs).
function M.client_fields(method, client, server)
  local headers, fields = {}, {}
  if method == "client_secret_basic" then
    -- RFC 6749 2.3.1: each part form-encoded before the base64.
    headers.Authorization = "Basic " .. core.base64_encode(form_escape(client.client_id) .. ":"
      .. form_escape(client.client_secret))
  elseif method == "none" then
    fields[#fields + 1] = { "client_id", client.client_id }
  elseif method == "client_secret_post" then
    fields[#fields + 1] = { "client_id", client.client_id }
    fields[#fields + 1] = { "client_secret", client.client_secret }
  else
    -- aud: the issuer (RFC 7523 3; the token endpoint when the metadata has none)
    local assertion, why = client_assertion(client, server.issuer or server.token_endpoint)
    if not assertion then return nil, "cannot sign the client assertion with --client-key: " .. why end
    fields[#fields + 1] = { "client_id", client.client_id }
    fields[#fields + 1] = { "client_assertion_type", JWT_BEARER }
    fields[#fields + 1] = { "client_assertion", assertion }
  end
  return headers, fields
end

-- POST the token request (client credentials, or the JWT bearer grant
-- with assertion): the token answer, or nil and why.
local function request_token(opts, server, method, resource, scope, assertion)
  local endpoint = server.token_endpoint
  local allowed, why = M.credentials_allowed(endpoint)
  if not allowed then return nil, not_sending(endpoint, why) end
  local fields = { { "grant_type", assertion and JWT_BEARER_GRANT or "client_credentials" },
    { "assertion", assertion }, { "resource", resource }, { "scope", scope } }
  local headers, extra = M.client_fields(method, opts, server)
  if not headers then return nil, extra end
  for _, kv in ipairs(extra) do fields[#fields + 1] = kv end
  headers["Content-Type"] = "application/x-www-form-urlencoded"
  headers.Accept = "application/json"
  local answer, err = core.oauth_fetch { method = "POST", url = endpoint, headers = headers, body = form(fields) }
  if not answer then return nil, ("the token request to %s failed: %s"):format(endpoint, err) end
  if answer.status ~= 200 then
    local grant = assertion and JWT_BEARER_GRANT or "client_credentials"
    local listed = server.grant_types_supported
    local note = type(listed) == "table" and not list_has(listed, grant)
      and ("; its metadata lists grant_types_supported %s, not %s"):format(table.concat(listed, ", "), grant) or ""
    return nil, ("the token endpoint %s refused the %s (%s%s): %s%s"):format(endpoint,
      assertion and "JWT bearer assertion" or "client credentials", method,
      opts.client_id and (", client " .. opts.client_id) or "", describe(answer), note)
  end
  local doc = core.json_decode(answer.body)
  if type(doc) ~= "table" or type(doc.access_token) ~= "string" or doc.access_token == "" then
    return nil, ("the token endpoint %s answered HTTP 200 without an access_token"):format(endpoint)
  end
  if type(doc.token_type) == "string" and doc.token_type:lower() ~= "bearer" then
    return nil, ("the token endpoint %s gave a %s token; luamcp call sends only Bearer tokens"):format(endpoint,
      doc.token_type)
  end
  return doc
end

---------------------------------------------------------------------------
-- authorize
---------------------------------------------------------------------------

--- An authorize function for mcp.client.connect's target.authorize.
--- opts: client_id, and client_secret or key_pem (+ key_alg "ES256" |
--- "RS256"); or assertion (a JWT: the JWT bearer grant; client_id then
--- optional); or idp = {issuer, id_token, client_id} (enterprise-managed:
--- the ID token exchanged for an ID-JAG, then the JWT bearer grant); scope
--- (else the challenge's, else the PRM's scopes_supported); issuer (the
--- only authorization server the credentials may go to: a PRM naming
--- another is refused); notice(text) (without issuer: told, once per
--- authorization server, where a secret or key is about to go);
--- client_metadata_url (a client ID metadata document's https URL).
--- login: the authorization-code grant (mcp.client_login's flow table:
--- headless, open, say, registrations, on_registered, dpop) is allowed,
--- and used when no client secret, key or assertion is given or the
--- authorization server does not do client credentials; login.stored: a
--- kept token ({access_token, refresh_token, expires_at, scope, issuer,
--- resource, client, token_type}) the connection starts with;
--- login.on_token(kept): called with each new one, to keep it;
--- login.person: always the authorization-code grant (luamcp login).
--- The function returns the token and its scheme ("Bearer" or "DPoP").
function M.new(opts)
  local login = opts.login
  assert(opts.client_id or opts.assertion or opts.idp or login,
    "client_auth.new needs client_id, assertion, idp or login")
  opts.key_alg = opts.key_alg or "ES256"
  local flow = login and setmetatable({ opts = opts }, { __index = login })
  if flow then flow.registrations = flow.registrations or {} end
  -- tokens: how many this connection obtained (a fresh one refused is a
  -- failure, never a loop); kept: what a refresh or a move needs.
  local state = { tokens = 0, moves = 0 }
  if login and login.stored then
    local k = login.stored
    state.token, state.scheme, state.refresh_token, state.expires_at = k.access_token, k.token_type, k.refresh_token,
      k.expires_at
    state.scope, state.issuer, state.resource, state.client = k.scope, k.issuer, k.resource, k.client
    if k.dpop_key then
      state.dpop = require("mcp.dpop").new(k.dpop_key)
      flow.dpop = state.dpop
    end
  end

  local function took(answer, scope, resource, client)
    state.token, state.scope, state.tokens, state.resource = answer.access_token, scope, state.tokens + 1, resource
    state.scheme = answer.token_type or "Bearer"
    state.dpop = state.scheme == "DPoP" and flow and flow.dpop or nil
    state.refresh_token = type(answer.refresh_token) == "string" and answer.refresh_token or state.refresh_token
    state.client = client or state.client
    local lifetime = math.tointeger(answer.expires_in)
    state.expires_at = lifetime and lifetime > 0 and os.time() + lifetime or nil
    if login and login.on_token and client then
      login.on_token { access_token = state.token, token_type = state.scheme, refresh_token = state.refresh_token,
        expires_at = state.expires_at, scope = scope, issuer = state.issuer, resource = resource,
        dpop_key = state.dpop and state.dpop:saved() or nil,
        token_endpoint = state.server and state.server.token_endpoint or nil,
        -- What a refresh needs: never a secret given on the command line
        -- (that stays in the environment it came from).
        client = (client.metadata_document or client.preregistered) and { client_id = client.client_id } or client }
    end
    return state.token, state.scheme
  end

  -- The refresh token grant with what is kept; nil when there is nothing
  -- to refresh with or the authorization server refused.
  local function refresh()
    if not (state.refresh_token and state.client and state.issuer and not state.refreshing) then return nil end
    state.refreshing = true
    local server = state.server
    if not server or state.server_issuer ~= state.issuer then server = find_server_metadata(state.issuer) end
    if not server then return nil end
    state.server, state.server_issuer = server, state.issuer
    -- A client registered beforehand authenticates with what this run was
    -- given (its secret or key is never kept).
    local client = state.client
    if opts.client_id == client.client_id and (opts.client_secret or opts.key_pem) then
      client = { client_id = opts.client_id, client_secret = opts.client_secret, key_pem = opts.key_pem,
        key_alg = opts.key_alg }
    end
    local client_login = require "mcp.client_login"
    local answer = client_login.refresh(M, server, client, state.refresh_token, state.resource, flow and flow.dpop)
    if not answer then
      state.refresh_token = nil
      return nil
    end
    state.tokens = state.tokens - 1 -- a refresh is the same grant, renewed
    return took(answer, state.scope, state.resource, state.client)
  end

  -- Called by a caller that wants the token before a request (a kept one
  -- past its expiry is refreshed first): token, scheme or nil.
  local function current()
    if state.token and state.expires_at and os.time() >= state.expires_at then
      local token, scheme = refresh()
      if token then return token, scheme end
    end
    return state.token, state.scheme
  end

  local function authorize(info)
    local challenge = M.parse_challenge(info.challenge)
    local step_up = info.status == 403 and challenge.error == "insufficient_scope"
    -- RFC 9449 9: the server wants its nonce in the proof; the same token
    -- goes again with a proof that has it (once: a nonce already taken is
    -- not new).
    if state.token and state.dpop and challenge.error == "use_dpop_nonce"
      and state.dpop:take_nonce(info.url, info.dpop_nonce) then
      return state.token, state.scheme
    end
    if state.token and not step_up then
      -- The token was refused: one that ran out (or was kept from an
      -- earlier run) is refreshed, else a new one is got as if from the start.
      state.refreshing = nil
      if state.tokens == 0 or (state.expires_at and os.time() >= state.expires_at) then
        local token, scheme = refresh()
        if token then return token, scheme end
        state.token, state.tokens, state.expires_at = nil, 0, nil
      end
    end
    local refused = state.token and not step_up

    -- 1. Protected Resource Metadata
    local prm, where = find_resource_metadata(info.url, challenge)
    local resource, issuer
    if prm then
      if prm.resource ~= nil then
        if type(prm.resource) ~= "string" or not M.resource_allowed(info.url, prm.resource) then
          return nil, ("the Protected Resource Metadata at %s is for %s, not %s: not sending credentials"):format(
            where, tostring(prm.resource), info.url)
        end
        resource = prm.resource
      end
      local servers = prm.authorization_servers
      issuer = type(servers) == "table" and type(servers[1]) == "string" and servers[1] or nil
      if not issuer then return nil, ("the Protected Resource Metadata at %s names no authorization_servers"):format(where) end
      if opts.issuer and trim_slash(issuer) ~= trim_slash(opts.issuer) then
        return nil, ("the Protected Resource Metadata at %s names the authorization server %s, not --issuer %s:"
          .. " not sending credentials"):format(where, issuer, opts.issuer)
      end
    else
      return nil, ("cannot authorize at %s: %s"):format(info.url, where)
    end
    resource = resource or M.canonical_url(info.url)

    if refused then
      -- A token just issued and refused: a failure, unless the server's
      -- metadata now names another authorization server (it moved:
      -- SEP-2352), which is followed once, with a registration of its own.
      if state.issuer and issuer ~= state.issuer and state.moves == 0 and login then
        state.moves = state.moves + 1
        state.token, state.tokens, state.refresh_token, state.client, state.scope = nil, 0, nil, nil, nil
      else
        return nil, ("%s refused the access token the authorization server just issued (HTTP %s%s)"):format(
          info.url, tostring(info.status),
          challenge.error and (": " .. challenge.error .. (challenge.error_description and
            (" " .. challenge.error_description) or "")) or "")
      end
    end
    if state.tokens >= 2 then
      return nil, ("%s still answers HTTP %s (%s) with a token for scope %q"):format(info.url,
        tostring(info.status), tostring(challenge.error), tostring(state.scope))
    end

    -- 2. The authorization server's metadata
    local server, why = state.server, nil
    if not server or state.server_issuer ~= issuer then
      server, why = find_server_metadata(issuer)
      if not server then return nil, ("cannot find the authorization server %s: %s"):format(issuer, why) end
      state.server, state.server_issuer = server, issuer
      if not opts.issuer and opts.notice and (opts.client_secret or opts.key_pem) then
        opts.notice(("sending the client credentials to the authorization server %s (named by %s;"
          .. " --issuer URL allows only that one)"):format(issuer, where))
      end
    end
    if state.issuer and state.issuer ~= issuer then state.client = nil end
    state.issuer = issuer
    local grants = server.grant_types_supported
    local code_flow = login and (login.person or not (opts.client_secret or opts.key_pem or opts.assertion or opts.idp)
      or (type(grants) == "table" and not list_has(grants, "client_credentials")
        and list_has(grants, "authorization_code") and not opts.assertion and not opts.idp))
    local method
    if not code_flow then
      method, why = M.auth_method(opts, server)
      if not method then return nil, ("cannot authenticate to %s: %s"):format(issuer, why) end
    end

    -- 3. The scope: what the user asked for, what the challenge asks for
    -- (on a step-up, what it asks for added to what the token had), else
    -- everything the resource offers.
    local scope = opts.scope or challenge.scope
    if step_up and challenge.scope and state.scope then
      local have = {}
      for s in state.scope:gmatch("%S+") do have[s] = true end
      local merged = { state.scope }
      for s in challenge.scope:gmatch("%S+") do
        if not have[s] then merged[#merged + 1] = s end
      end
      scope = table.concat(merged, " ")
    elseif step_up and not challenge.scope then
      return nil, ("%s answered HTTP 403 insufficient_scope without saying which scope it needs"):format(info.url)
    end
    if not scope and type(prm.scopes_supported) == "table" and #prm.scopes_supported > 0 then
      scope = table.concat(prm.scopes_supported, " ")
    end
    -- A person's login asks for a refresh token too where the
    -- authorization server offers one (SEP-2207).
    if code_flow and scope and list_has(server.scopes_supported, "offline_access")
      and not (" " .. scope .. " "):find(" offline_access ", 1, true) then
      scope = scope .. " offline_access"
    end
    if step_up and scope == state.scope then
      return nil, ("%s wants more scope (%s) than the token has, and the request for it was already made"):format(
        info.url, tostring(challenge.scope))
    end

    -- 4. The token: the authorization-code grant, or (for an
    -- enterprise-managed client, first the ID-JAG) client credentials or
    -- the JWT bearer grant.
    if code_flow then
      local client_login = require "mcp.client_login"
      local answer, client = client_login.authorize(M, flow, server, resource, scope)
      if not answer then return nil, client end
      return took(answer, scope, resource, client)
    end
    local assertion = opts.assertion
    if opts.idp then
      assertion, why = exchange_id_token(opts.idp, server, resource, scope)
      if not assertion then return nil, why end
    end
    local answer
    answer, why = request_token(opts, server, method, resource, scope, assertion)
    if not answer then return nil, why end
    return took(answer, scope, resource, nil)
  end

  -- A fresh DPoP proof for a request to url with the token (nil for a
  -- Bearer token).
  local function proof(method, url)
    if state.token and state.scheme == "DPoP" and state.dpop then return state.dpop:proof(method, url, state.token) end
  end

  -- Has the token run out (its expires_in passed)?
  local function expired() return state.expires_at ~= nil and os.time() >= state.expires_at end

  return setmetatable({ current = current, proof = proof, expired = expired },
    { __call = function(_, info) return authorize(info) end })
end

return M
