-- docs/lua-api.md: its examples run, in order, as one script (so the
-- documentation cannot drift from the module).
package.path = (arg[0]:match("^(.*)/") or ".") .. "/?.lua;" .. package.path
local T = require "t"

local doc = assert(io.open(T.root .. "/docs/lua-api.md")):read("a")
local blocks = {}
for code in doc:gmatch("```lua\n(.-)```") do blocks[#blocks + 1] = code end
T.ok(#blocks > 60, "docs have an example per function", #blocks)
local src = table.concat(blocks, "\n")
src = src:gsub('"%.%./shared/data/gptoss20b%-routing%.h5"', string.format("%q", T.data))
src = src:gsub("/tmp/eldr%-doc", T.tmp .. "/doc")
local printed = 0
local chunk, err = load(src, "=docs/lua-api.md", "t")
T.ok(chunk ~= nil, "the examples compile", err)
if chunk then
  local real_print = print
  print = function() printed = printed + 1 end -- helpers print through the global
  local ok, msg = pcall(chunk)
  print = real_print
  T.ok(ok, "the examples run", msg)
  T.ok(printed > 30, "the examples print")
end
T.done()
