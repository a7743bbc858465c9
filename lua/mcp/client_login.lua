-- mcp.client_login: the authorization-code grant (OAuth 2.1 4.1) for
-- luamcp as a client that logs a person in: PKCE with S256 (RFC 7636),
-- state, the resource indicator (RFC 8707), the authorization response's
-- iss checked (RFC 9207), the browser sent back to a loopback listener
-- opened for the flow and closed after (RFC 8252 7.3), and the refresh
-- token grant. mcp.client_auth decides when; this does the flow.
--
-- The client's identity, in the MCP specification's order of preference:
--   1. a client registered beforehand (client_id, and client_secret for a
--      confidential one);
--   2. a client ID metadata document: an https URL as client_id, when the
--      authorization server says client_id_metadata_document_supported;
--   3. dynamic client registration (RFC 7591) at its registration_endpoint,
--      as a public native client (no secret asked for).
-- A registration is kept per authorization server (an issuer's client id
-- never goes to another: SEP-2352).
--
-- Headless (flow.headless): the authorization address is fetched here and
-- its redirect (the Location header) read instead of a browser's, for
-- machines and tests; an authorization server that wants a person (a
-- login page) is then an error that says so.

local core = require "luamcp.client"

local M = {}

-- How long a person has to log in.
M.LOGIN_TIMEOUT_MS = 5 * 60 * 1000

-- query string -> table (the last value of a repeated name)
function M.parse_query(query)
  local out = {}
  for pair in tostring(query or ""):gmatch("[^&]+") do
    local k, v = pair:match("^([^=]*)=?(.*)$")
    local function dec(s)
      return (s:gsub("+", " "):gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end))
    end
    out[dec(k)] = dec(v)
  end
  return out
end

local function list_has(list, value)
  if type(list) ~= "table" then return false end
  for _, v in ipairs(list) do
    if v == value then return true end
  end
  return false
end
M.list_has = list_has

-- The client registration to use at this authorization server (see the
-- head of the file): {client_id=, client_secret=, method=} or nil, why.
-- auth: mcp.client_auth's helpers; flow.registrations: issuer -> kept one.
local function client_identity(auth, flow, server, redirect_uri)
  local opts = flow.opts
  if opts.client_id then
    return { client_id = opts.client_id, client_secret = opts.client_secret, key_pem = opts.key_pem,
      key_alg = opts.key_alg, preregistered = true }
  end
  if opts.client_metadata_url and server.client_id_metadata_document_supported == true then
    return { client_id = opts.client_metadata_url, method = "none", metadata_document = true }
  end
  local kept = flow.registrations and flow.registrations[server.issuer]
  if kept then return kept end
  local endpoint = server.registration_endpoint
  if type(endpoint) ~= "string" then
    return nil, ("the authorization server %s offers no dynamic client registration%s: give a client registered"
      .. " there with --client-id ID"):format(server.issuer, server.client_id_metadata_document_supported == true
        and " (it takes client ID metadata documents: --client-metadata-url URL)" or "")
  end
  local allowed, why = auth.credentials_allowed(endpoint)
  if not allowed then return nil, ("not registering at %s: %s"):format(endpoint, why) end
  local body = core.json_encode {
    client_name = opts.client_name or "luamcp",
    redirect_uris = { redirect_uri },
    grant_types = { "authorization_code", "refresh_token" },
    response_types = { "code" },
    token_endpoint_auth_method = "none",
    application_type = "native",
  }
  local answer, err = core.oauth_fetch { method = "POST", url = endpoint, body = body,
    headers = { ["Content-Type"] = "application/json", Accept = "application/json" } }
  if not answer then return nil, ("the client registration at %s failed: %s"):format(endpoint, err) end
  if answer.status ~= 201 and answer.status ~= 200 then
    return nil, ("the authorization server refused to register luamcp at %s: %s"):format(endpoint,
      auth.describe(answer))
  end
  local doc = core.json_decode(answer.body)
  if type(doc) ~= "table" or type(doc.client_id) ~= "string" or doc.client_id == "" then
    return nil, ("the client registration at %s answered without a client_id"):format(endpoint)
  end
  local registration = { client_id = doc.client_id, issuer = server.issuer, registered = true,
    client_secret = type(doc.client_secret) == "string" and doc.client_secret ~= "" and doc.client_secret or nil,
    method = type(doc.token_endpoint_auth_method) == "string" and doc.token_endpoint_auth_method or nil }
  if flow.registrations then flow.registrations[server.issuer] = registration end
  if flow.on_registered then flow.on_registered(server.issuer, registration) end
  return registration
end

-- The token endpoint's client authentication for a client identity:
-- headers and extra form fields, or nil, why.
local function client_authentication(auth, server, client)
  local method = client.method
  if client.client_secret and method ~= "none" then
    if method ~= "client_secret_basic" and method ~= "client_secret_post" then
      local why
      method, why = auth.auth_method({ client_secret = client.client_secret }, server)
      -- A secret the authorization server has no use for: a public client.
      if not method and list_has(server.token_endpoint_auth_methods_supported, "none") then method = "none" end
      if not method then return nil, why end
    end
  elseif client.key_pem then
    method = "private_key_jwt"
  else
    method = "none"
  end
  return auth.client_fields(method, client, server)
end

-- POST a grant to the token endpoint: the token answer, or nil, why.
function M.token_request(auth, server, client, fields, dpop)
  local endpoint = server.token_endpoint
  local allowed, why = auth.credentials_allowed(endpoint)
  if not allowed then return nil, ("not sending the authorization code to %s: %s"):format(endpoint, why) end
  local headers, extra = client_authentication(auth, server, client)
  if not headers then return nil, extra end
  for _, kv in ipairs(extra) do fields[#fields + 1] = kv end
  headers["Content-Type"] = "application/x-www-form-urlencoded"
  headers.Accept = "application/json"
  local body = auth.form(fields)
  local answer, err
  for _ = 1, 2 do
    if dpop then headers.DPoP = dpop:proof("POST", endpoint) end
    answer, err = core.oauth_fetch { method = "POST", url = endpoint, headers = headers, body = body }
    if not answer then return nil, ("the token request to %s failed: %s"):format(endpoint, err) end
    -- RFC 9449 8: the authorization server's nonce, then once more.
    if not (dpop and answer.status == 400 and dpop:take_nonce(endpoint, answer.headers)) then break end
  end
  if answer.status ~= 200 then
    return nil, ("the token endpoint %s refused the %s: %s"):format(endpoint, fields[1][2], auth.describe(answer))
  end
  local doc = core.json_decode(answer.body)
  if type(doc) ~= "table" or type(doc.access_token) ~= "string" or doc.access_token == "" then
    return nil, ("the token endpoint %s answered HTTP 200 without an access_token"):format(endpoint)
  end
  local kind = type(doc.token_type) == "string" and doc.token_type:lower() or "bearer"
  if kind ~= "bearer" and not (kind == "dpop" and dpop) then
    return nil, ("the token endpoint %s gave a %s token, which luamcp does not send"):format(endpoint, doc.token_type)
  end
  doc.token_type = kind == "dpop" and "DPoP" or "Bearer"
  return doc
end

--- The refresh token grant (OAuth 2.1 4.3): the token answer, or nil, why.
function M.refresh(auth, server, client, refresh_token, resource, dpop)
  return M.token_request(auth, server, client, { { "grant_type", "refresh_token" },
    { "refresh_token", refresh_token }, { "resource", resource } }, dpop)
end

--- The authorization-code grant. flow: {opts, headless, open(url) (the
--- browser; else the address is printed), say(text), registrations,
--- on_registered(issuer, registration), dpop, unattended (why no login
--- can happen here)}; server: the authorization
--- server's metadata (issuer checked); resource, scope (or nil: no scope
--- asked for). The token answer and the client identity used, or nil, why.
function M.authorize(auth, flow, server, resource, scope)
  if flow.unattended then return nil, flow.unattended end
  if not list_has(server.code_challenge_methods_supported, "S256") then
    return nil, ("the authorization server %s does not say it supports PKCE with S256"
      .. " (code_challenge_methods_supported): refusing to log in without it"):format(server.issuer)
  end
  if type(server.authorization_endpoint) ~= "string" or not server.authorization_endpoint:match("^https?://") then
    return nil, ("the authorization server %s names no authorization_endpoint"):format(server.issuer)
  end
  -- Proof of possession where the authorization server takes it (RFC
  -- 9449 5.1): a key for this login, kept with its token.
  if not flow.dpop and list_has(server.dpop_signing_alg_values_supported, "ES256") then
    flow.dpop = require("mcp.dpop").new()
  end
  local listener, why = core.redirect_listen()
  if not listener then return nil, why end
  local redirect_uri = ("http://127.0.0.1:%d/callback"):format(listener:port())
  local ok, token, client = pcall(function()
    local client, err = client_identity(auth, flow, server, redirect_uri)
    if not client then return nil, err end
    local verifier = core.random_base64url(32)
    local state = core.random_base64url(16)
    local query = auth.form {
      { "response_type", "code" }, { "client_id", client.client_id }, { "redirect_uri", redirect_uri },
      { "scope", scope }, { "state", state }, { "code_challenge", core.sha256_base64url(verifier) },
      { "code_challenge_method", "S256" }, { "resource", resource },
      -- OpenID Connect Core 11: offline_access is granted only with consent
      -- asked for (oidc-provider drops it otherwise).
      { "prompt", scope and (" " .. scope .. " "):find(" offline_access ", 1, true) and "consent" or nil },
    }
    local address = server.authorization_endpoint .. (server.authorization_endpoint:find("?", 1, true) and "&" or "?")
      .. query
    local target
    if flow.headless then
      local answer
      answer, err = core.oauth_fetch { method = "GET", url = address }
      if not answer then return nil, ("the authorization request to %s failed: %s"):format(
        server.authorization_endpoint, err) end
      local location = answer.headers and answer.headers.location
      if not location or location:sub(1, #redirect_uri) ~= redirect_uri then
        return nil, ("the authorization endpoint %s answered HTTP %s %s: it wants a person to log in;"
          .. " run luamcp login URL (without --headless)"):format(server.authorization_endpoint,
          tostring(answer.status), location and ("with a redirect to " .. location:match("^[^?]*")) or
          "without a redirect back")
      end
      target = location:sub(#redirect_uri + 1)
    else
      flow.open(address)
      flow.say(("waiting for the browser to come back to %s (the login at %s; Ctrl-C gives up)"):format(
        redirect_uri, server.issuer))
      target, err = listener:wait(flow.timeout_ms or M.LOGIN_TIMEOUT_MS)
      if not target then
        return nil, err == "interrupted" and "the login was interrupted"
          or ("nobody came back to %s within %d s"):format(redirect_uri, (flow.timeout_ms or M.LOGIN_TIMEOUT_MS) // 1000)
      end
      target = target:sub(#"/callback" + 1)
    end
    local response = M.parse_query(target:match("^%?(.*)$") or "")
    if response.state ~= state then
      return nil, "the authorization response's state is not the one sent: not using it (a forged response?)"
    end
    -- RFC 9207 2.4: iss, when present, is the issuer exactly (no
    -- normalizing); missing, it is an error where the metadata promised it.
    if response.iss ~= nil and response.iss ~= server.issuer then
      return nil, ("the authorization response names the issuer %s, not %s (RFC 9207): not using it"):format(
        response.iss, server.issuer)
    end
    if response.iss == nil and server.authorization_response_iss_parameter_supported == true then
      return nil, ("the authorization response has no iss though %s says it sends one (RFC 9207): not using it"):format(
        server.issuer)
    end
    if response.error then
      return nil, ("the authorization server said %s%s"):format(response.error,
        response.error_description and (": " .. response.error_description) or "")
    end
    if not response.code or response.code == "" then return nil, "the authorization response has no code" end
    local answer
    answer, err = M.token_request(auth, server, client, { { "grant_type", "authorization_code" },
      { "code", response.code }, { "redirect_uri", redirect_uri }, { "code_verifier", verifier },
      { "resource", resource } }, flow.dpop)
    if not answer then return nil, err end
    return answer, client
  end)
  listener:close()
  if not ok then error(token, 0) end
  return token, client
end

return M
