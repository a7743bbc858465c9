/*
 * lua_http.h - mcp.http: HTTP(S) requests on the loop, through libcurl
 * (loaded on first use).
 */
#ifndef LUAMCP_LUA_HTTP_H
#define LUAMCP_LUA_HTTP_H

#include "app/app.h"

/* core.http_request(options): yields until the response, or fails. */
int lua_http_request(lua_State *L);

#endif
