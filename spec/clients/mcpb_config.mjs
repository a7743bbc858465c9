// How a host resolves an MCP Bundle's server.mcp_config on one OS, by the
// official @anthropic-ai/mcpb library's own getMcpConfigForManifest (what
// Claude Desktop uses): platform_overrides picked by process.platform,
// ${__dirname} replaced. Prints the resolved config as one JSON line;
// cross_build_spec.lua checks that each OS starts its own program.
//
// Usage: node mcpb_config.mjs MCPB_LIBRARY_INDEX_JS MANIFEST_JSON PLATFORM DIR
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const [library, manifestPath, platform, dir] = process.argv.slice(2);
const { getMcpConfigForManifest } = await import(pathToFileURL(library).href);
// The library reads process.platform, as a host on that OS would see it.
Object.defineProperty(process, "platform", { value: platform });
const manifest = JSON.parse(readFileSync(manifestPath, "utf8"));
const config = await getMcpConfigForManifest({
  manifest,
  extensionPath: dir,
  systemDirs: {},
  userConfig: {},
  pathSeparator: platform === "win32" ? "\\" : "/",
});
console.log(JSON.stringify(config ?? null));
