-- tests/lua/vg_seeds.lua - run by tests/cli/valgrind.sh under memcheck: the Lua paths
-- that hold C memory across threads and errors (eldr.simulate with seeds, eldr.advise,
-- progress callbacks that raise, the split helpers). Not a TAP test itself.
local t = eldr.load(arg[1])
local rate = 40
local res, info = eldr.simulate(t, {workers = 2, rate = rate, seeds = 2, tau = {0, 0.1}, output_tokens = 16,
                                    progress = function() end})
local a = eldr.advise(t, {workers = 2, tau = 0.1, rate = rate, seeds = 2, output_tokens = 16})
print(#res, a.recommendation.sentence, info.split.text)
pcall(eldr.advise, t, {workers = 2, tau = 0.1, rate = rate, seeds = 2, output_tokens = 16,
                       progress = function() error("x") end})
pcall(eldr.simulate, t, {workers = 2, rate = rate, seeds = 2, output_tokens = 16, progress = function() error("y") end})
pcall(eldr.simulate, t, {split = "bad"})
local c, e, i = eldr.calib_split(t, {mode = "stratified"})
local c2 = t:split{fraction = 0.3, mode = "random"}
print(#c, #e, #c2)
