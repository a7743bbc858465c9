// A small server written with the official TypeScript SDK v2
// (@modelcontextprotocol/server, which speaks 2026-07-28 and 2025-11-25),
// for specs where luamcp is the CLIENT (mcp.client, mcp.mount).
//
// Usage: node sdk_server.mjs stdio
//        node sdk_server.mjs http     (prints "listening PORT" on stderr; 127.0.0.1, port chosen by the OS)
// Tools: echo {text} -> "sdk says TEXT"; hold {marker} writes MARKER.started, waits until the
// request is cancelled, then writes "cancelled" to MARKER.
import http from "node:http";
import { writeFileSync } from "node:fs";
import { z } from "zod";
import { McpServer, createMcpHandler } from "@modelcontextprotocol/server";
import { serveStdio } from "@modelcontextprotocol/server/stdio";
import { toNodeHandler } from "@modelcontextprotocol/node";

function factory() {
  const server = new McpServer({ name: "sdk-inner", version: "1.0.0" }, { capabilities: { tools: {} } });
  server.registerTool(
    "echo",
    { description: "Says the text back", inputSchema: z.object({ text: z.string() }) },
    async ({ text }) => ({ content: [{ type: "text", text: "sdk says " + text }] }),
  );
  server.registerTool(
    "hold",
    { description: "Waits to be cancelled", inputSchema: z.object({ marker: z.string() }) },
    async ({ marker }, ctx) => {
      writeFileSync(marker + ".started", "started");
      await new Promise((resolve) => {
        if (ctx.mcpReq.signal.aborted) resolve();
        ctx.mcpReq.signal.addEventListener("abort", resolve);
        setTimeout(resolve, 60000);
      });
      writeFileSync(marker, ctx.mcpReq.signal.aborted ? "cancelled" : "ended");
      return { content: [{ type: "text", text: "held" }] };
    },
  );
  return server;
}

if (process.argv[2] === "stdio") {
  serveStdio(factory);
} else {
  const handler = createMcpHandler(factory);
  const server = http.createServer(toNodeHandler(handler));
  server.listen(0, "127.0.0.1", () => process.stderr.write(`listening ${server.address().port}\n`));
}
