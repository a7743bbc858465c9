local mcp = require "mcp"

local PNG = mcp.base64.decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==")

mcp.prompt { name = "test_simple_prompt", title = "Simple Test Prompt", description = "A simple prompt without arguments",
  get = function() return "This is a simple prompt for testing." end }

mcp.prompt { name = "test_prompt_with_arguments", title = "Prompt With Arguments",
  description = "A prompt with required arguments",
  arguments = { { name = "arg1", description = "First test argument", required = true },
                { name = "arg2", description = "Second test argument", required = true } },
  get = function(args) return ("Prompt with arguments: arg1='%s', arg2='%s'"):format(args.arg1, args.arg2) end,
  complete = { arg1 = function(value) return {} end } }

mcp.prompt { name = "test_prompt_with_embedded_resource", title = "Prompt With Embedded Resource",
  description = "A prompt that includes an embedded resource",
  arguments = { { name = "resourceUri", description = "URI of the resource to embed", required = true } },
  get = function(args)
    return {
      { role = "user", content = mcp.embedded { uri = args.resourceUri, mimeType = "text/plain",
                                                text = "Embedded resource content for testing." } },
      "Please process the embedded resource above.",
    }
  end }

mcp.prompt { name = "test_prompt_with_image", title = "Prompt With Image", description = "A prompt that includes image content",
  get = function()
    return { { role = "user", content = mcp.image(PNG, "image/png") }, "Please analyze the image above." }
  end }
