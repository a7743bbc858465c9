// A push-notification receiver for spec/a2a_spec.lua: answers the first
// FAIL requests 503, the rest 204, and prints one JSON line per request:
//   node a2a_push_receiver.mjs [FAIL]   -> {"port": N}, then {"status", "token", "auth", "body"} per request
import http from "node:http";

let fail = Number(process.argv[2] ?? 0);
const server = http.createServer((req, res) => {
  let body = "";
  req.on("data", (d) => (body += d));
  req.on("end", () => {
    const status = fail > 0 ? 503 : 204;
    if (fail > 0) fail--;
    console.log(JSON.stringify({ status, token: req.headers["x-a2a-notification-token"] ?? null,
                                 auth: req.headers.authorization ?? null, body: JSON.parse(body) }));
    res.writeHead(status).end();
  });
});
server.listen(0, "127.0.0.1", () => console.log(JSON.stringify({ port: server.address().port })));
