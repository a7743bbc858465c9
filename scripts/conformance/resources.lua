local mcp = require "mcp"

local PNG = mcp.base64.decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==")

mcp.resource { uri = "test://static-text", name = "static-text", title = "Static Text Resource",
  description = "A static text resource for testing", mimeType = "text/plain",
  read = function() return "This is the content of the static text resource." end }

mcp.resource { uri = "test://static-binary", name = "static-binary", title = "Static Binary Resource",
  description = "A static binary resource (image) for testing", mimeType = "image/png",
  read = function() return { blob = PNG } end }

mcp.resource { uri = "test://watched-resource", name = "watched-resource", title = "Watched Resource",
  description = "A resource clients can subscribe to", mimeType = "text/plain",
  read = function() return "Watched resource content" end }

mcp.template { uriTemplate = "test://template/{id}/data", name = "template", title = "Resource Template",
  description = "A resource template with parameter substitution", mimeType = "application/json",
  read = function(vars)
    return mcp.json.encode { id = vars.id, templateTest = true, data = "Data for ID: " .. vars.id }
  end }
